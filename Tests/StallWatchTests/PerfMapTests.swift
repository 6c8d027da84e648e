// Names of JIT code from a runtime's perf map.
import Foundation
import StallWatchTestSupport
import Testing

@testable import StallWatch

@Suite(.offPool) struct PerfMapTests {
    @Test func anAddressInsideARegionGetsItsNameAndOffsetAndOthersNone() {
        let pid = Int32.max - 7  // no such process: only the file matters
        let path = "/tmp/perf-\(pid).map"
        defer { unlink(path) }
        let text = "7f0000001000 100 JS:*burnCpu app.js:3\n7f0000000800 20 Builtin:CallFunction\nnot a line\n"
        #expect(FileManager.default.createFile(atPath: path, contents: Data(text.utf8)))
        var map = PerfMap(processID: pid)
        #expect(map.lookup(0x7f00_0000_1010)?.name == "JS:*burnCpu app.js:3")
        #expect(map.lookup(0x7f00_0000_1010)?.offset == 0x10)
        #expect(map.lookup(0x7f00_0000_0810)?.name == "Builtin:CallFunction")
        #expect(map.lookup(0x7f00_0000_0900) == nil)
        #expect(map.lookup(0x7f00_0000_2000) == nil)
    }

    @Test func regionsCompiledLaterAreFoundAfterTheMapGrows() throws {
        let pid = Int32.max - 8
        let path = "/tmp/perf-\(pid).map"
        defer { unlink(path) }
        #expect(FileManager.default.createFile(atPath: path, contents: Data("1000 10 first\n".utf8)))
        var map = PerfMap(processID: pid)
        #expect(map.lookup(0x2005) == nil)
        let handle = try #require(FileHandle(forWritingAtPath: path))
        handle.seekToEndOfFile()
        handle.write(Data("2000 10 second\n".utf8))
        try handle.close()
        #expect(map.lookup(0x2005)?.name == "second")
    }

    @Test func syscall219IsNamedRestartSyscall() {
        #expect(SyscallTable.name(219) == "restart_syscall")
        #expect(SyscallTable.name(435) == "clone3")
        #expect(SyscallTable.name(9999) == "syscall_9999")
    }
}
