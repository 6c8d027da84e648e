// Tests of `stallwatch reports symbolicate`: filling symbols and lines from this test binary, refusing other builds.
import CStallWatchSymbols
import Foundation
import StallWatchTestSupport
import Testing

@testable import StallWatch
@testable import StallWatchCommands
@testable import StallWatchInspector

#if canImport(Glibc)
    import Glibc
#endif

@Suite(.offPool) struct ReportSymbolicateTests {
    /// This test binary, its build-id and load base, and the offset of a C function in it with DWARF lines.
    struct Target {
        var path: String
        var buildID: String
        var base: UInt64
        var functionOffset: UInt64
    }

    static func target() throws -> Target {
        let function: @convention(c) (UnsafePointer<CChar>?, UnsafeMutablePointer<Int32>?) -> OpaquePointer? =
            sw_symbols_open_file
        let address = UInt64(UInt(bitPattern: unsafeBitCast(function, to: UnsafeRawPointer.self)))
        let image = try #require(try ImageMap(processID: getpid()).image(containing: address))
        let path = image.path
        let base = image.base
        let buildID = try #require(BuildID.ofFile(atPath: path), "the test binary has a build-id")
        return Target(
            path: path, buildID: buildID, base: base,
            functionOffset: address - base)
    }

    /// A copy of the ended fixture whose first two frames point into this binary, without symbols.
    static func report(_ target: Target, buildID: String? = nil) -> StallReport {
        var report = ReportFixtures.endedStall
        let inner = target.functionOffset + 4
        let caller = target.functionOffset + 0x20
        report.samples[0].frames[0] = StackFrame(
            address: target.base + inner, image: target.path, offset: inner)
        report.samples[0].frames[1] = StackFrame(
            address: target.base + caller, image: target.path, offset: caller)
        report.images.append(
            ImageInfo(path: target.path, buildId: buildID ?? target.buildID, base: target.base, size: nil))
        return report
    }

    func write(_ report: StallReport) throws -> String {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("sw-sym-\(UUID().uuidString).json")
        try report.encodedJSON().write(to: file)
        return file.path
    }

    @Test func missingSymbolsAndLinesAreFilledFromABinaryWithTheSameBuildID() throws {
        let target = try Self.target()
        let input = try write(Self.report(target))
        let output = input + ".out.json"
        defer { for file in [input, output] { try? FileManager.default.removeItem(atPath: file) } }
        let (code, console) = CapturedConsole.run(["reports", "symbolicate", input, "-o", output])
        #expect(code == .ok, "\(console.standardError)")
        #expect(console.standardError.contains("stallwatch: 2 frames symbolicated from \(target.path)"))
        let report = try ReportStore.load(path: output)
        let frames = report.samples[0].frames
        #expect(frames[0].symbol == "sw_symbols_open_file")
        #expect(frames[0].symbolOffset == 4)
        #expect(frames[0].file?.hasSuffix("sw_symbols.c") == true)
        #expect(frames[0].line != nil)
        #expect(frames[1].symbol == "sw_symbols_open_file")
        #expect(frames[1].symbolOffset == 0x20, "measured from the return address")
        // What was already there is kept, and the report says what was done.
        #expect(frames[2] == ReportFixtures.endedStall.samples[0].frames[2])
        #expect(report.notes.last?.hasPrefix("Symbolicated offline by stallwatch reports symbolicate") == true)
        #expect(report.signature == ReportFixtures.endedStall.signature)
    }

    @Test func aBinaryWithADifferentBuildIDIsRefused() throws {
        let target = try Self.target()
        let wrong = String(repeating: "ab", count: 20)
        let input = try write(Self.report(target, buildID: wrong))
        let output = input + ".out.json"
        defer { for file in [input, output] { try? FileManager.default.removeItem(atPath: file) } }
        let (code, console) = CapturedConsole.run(
            ["reports", "symbolicate", input, "-o", output], environment: ["STALLWATCH_DEBUG_DIRECTORY": "/nonexistent"]
        )
        #expect(code == .failure)
        #expect(
            console.standardError.hasPrefix(
                "stallwatch: refusing \(target.path): its build-id is \(target.buildID) but the report's is \(wrong)"))
        #expect(!FileManager.default.fileExists(atPath: output), "nothing written")
    }

    @Test func theLibraryRefusesAWrongBuildWithItsOwnError() throws {
        let target = try Self.target()
        let wrong = String(repeating: "ab", count: 20)
        let symbolicator = ReportSymbolicator(debugDirectory: "/nonexistent")
        let error = try #require(throws: InspectorError.self) {
            try symbolicator.symbolicate(Self.report(target, buildID: wrong))
        }
        #expect(error.code == .buildIDMismatch)
        #expect(error.context == ["path": target.path, "expected": wrong, "found": target.buildID])
    }

    @Test func aSeparateDebugFileIsFoundByBuildID() throws {
        let target = try Self.target()
        // A fake /usr/lib/debug/.build-id tree holding (a copy of) this binary under its build-id, and a report
        // whose image path does not exist here.
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("sw-debug-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let symbolicator = ReportSymbolicator(debugDirectory: root.path)
        let debug = symbolicator.debugFile(forBuildID: target.buildID)
        try FileManager.default.createDirectory(
            atPath: (debug as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: debug, withDestinationPath: target.path)
        var moved = target
        moved.path = "/nonexistent/bin/service"
        let outcome = try symbolicator.symbolicate(Self.report(moved))
        #expect(outcome.filesUsed == [debug])
        #expect(outcome.report.samples[0].frames[0].symbol == "sw_symbols_open_file")
        #expect(
            outcome.warnings == [
                "/usr/lib/swift/linux/libdispatch.so: the report has no build-id for it, so no file can be checked; left as is"
            ])
    }

    @Test func imagesThatCannotBeMatchedAreLeftAsTheyWereWithAWarning() throws {
        var report = ReportFixtures.unrecoveredHang
        report.samples[0].frames[0].image = "/nonexistent/libc.so.6"
        report.images[1].path = "/nonexistent/libc.so.6"
        report.images[0].buildId = nil
        let outcome = try ReportSymbolicator(debugDirectory: "/nonexistent").symbolicate(report)
        #expect(outcome.framesFilled == 0)
        #expect(outcome.report == report, "unchanged, not even a note")
        #expect(
            outcome.warnings == [
                "/nonexistent/libc.so.6: not on this machine and no debug file "
                    + "/nonexistent/93/ac61ec5a8eb1396f9fbd350e3169a558528a40.debug; left as is",
                "/usr/local/bin/chat-demo: the report has no build-id for it, so no file can be checked; left as is",
            ])
    }
}
