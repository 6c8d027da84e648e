// `-o PATH` of the writing subcommands: a regular file is replaced atomically, anything else is written in place.
import Foundation
import StallWatch
import StallWatchCommands
import StallWatchTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite(.offPool) struct OutputDestinationTests {
    let reports = ReportFixtures.reportsDirectory.path

    /// A FIFO stands for every non-regular destination (`/dev/null`, `/dev/stdout`, a pipe): renaming a temporary
    /// file over it would leave a regular file where the pipe was, and the reader would get nothing.
    @Test(.timeLimit(.minutes(3)), arguments: ["export", "symbolicate", "html"])
    func aPipeGivenAsTheOutputStaysAPipeAndItsReaderGetsTheBytes(command: String) throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("sw-out-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let fifo = directory.appendingPathComponent("out").path
        try #require(mkfifo(fifo, 0o600) == 0, "mkfifo: \(String(cString: strerror(errno)))")
        let received = ReceivedBytes()
        let reader = Thread {
            received.set(FileHandle(forReadingAtPath: fifo)?.readDataToEndOfFile() ?? Data())
        }
        reader.start()
        let report = "\(reports)/stall-ended.json"
        let arguments: [String]
        switch command {
        case "export": arguments = ["reports", "export", report, "--format", "folded", "-o", fifo]
        case "symbolicate": arguments = ["reports", "symbolicate", report, "-o", fifo]
        default: arguments = ["reports", "html", report, "-o", fifo]
        }
        let (code, console) = CapturedConsole.run(arguments)
        #expect(code == .ok, "\(console.standardError)")
        if code != .ok {  // the command never opened the FIFO: release the reader blocked in its open
            let fd = open(fifo, O_WRONLY | O_NONBLOCK)
            if fd >= 0 { close(fd) }
        }
        #expect(received.wait(timeout: 20), "the reader got no end of file")
        var status = stat()
        try #require(stat(fifo, &status) == 0)
        #expect(status.st_mode & S_IFMT == S_IFIFO, "the FIFO was replaced")
        #expect(!(received.data?.isEmpty ?? true), "the reader got no bytes")
    }

    @Test func aRegularFileIsReplacedWhole() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("sw-out-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("out.folded").path
        try Data(repeating: 0x41, count: 1 << 20).write(to: URL(fileURLWithPath: file))
        let (code, _) = CapturedConsole.run(
            ["reports", "export", "\(reports)/stall-ended.json", "--format", "folded", "-o", file])
        #expect(code == .ok)
        let text = try String(contentsOfFile: file, encoding: .utf8)
        #expect(!text.contains("AAAA") && text.hasSuffix("\n"), "the old content was left behind")
    }
}

/// What the FIFO's reader thread got, handed to the test.
private final class ReceivedBytes: @unchecked Sendable {  // `lock` guards `bytes`.
    private let lock = NSCondition()
    private var bytes: Data?
    var data: Data? { lock.withLock { bytes } }

    func set(_ data: Data) {
        lock.withLock {
            bytes = data
            lock.broadcast()
        }
    }

    func wait(timeout seconds: Double) -> Bool {
        let deadline = Date(timeIntervalSinceNow: seconds)
        return lock.withLock {
            while bytes == nil { if !lock.wait(until: deadline) { return false } }
            return true
        }
    }
}
