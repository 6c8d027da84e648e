// Tests of `stallwatch reports list|show`: golden text on the fixtures, JSON output, exit codes, usage errors.
import Foundation
import StallWatch
import StallWatchInspector
import Testing

/// Collects what a command writes, for comparison.
final class CapturedConsole: @unchecked Sendable {
    private let lock = NSLock()
    private var out = ""
    private var err = ""
    var standardOutput: String { lock.withLock { out } }
    var standardError: String { lock.withLock { err } }
    var console: Console {
        Console(
            output: { text in self.lock.withLock { self.out += text } },
            errorOutput: { text in self.lock.withLock { self.err += text } }, useColor: false)
    }

    /// Runs the CLI as `main.swift` does, mapping errors the same way.
    static func run(_ arguments: [String], environment: [String: String] = ["TZ": "UTC"]) -> (ExitCode, CapturedConsole) {
        let captured = CapturedConsole()
        do {
            return (try StallWatchCLI.run(arguments, console: captured.console, environment: environment), captured)
        } catch {
            captured.console.printError(ExitCode.message(for: error))
            return (ExitCode(for: error), captured)
        }
    }
}

@Suite struct ReportsCLITests {
    let reports = ReportFixtures.reportsDirectory.path

    /// Compares with Fixtures/golden/<name>, with the fixtures' directory written as `<fixtures>`.
    func expectGolden(_ text: String, _ name: String) throws {
        let stable = text.replacingOccurrences(of: reports, with: "<fixtures>")
        if ReportFormatTests.updating {
            try stable.write(
                to: ReportFixtures.sourceDirectory.appendingPathComponent("golden/\(name)"), atomically: true, encoding: .utf8)
        }
        let golden = try String(contentsOf: ReportFixtures.directory.appendingPathComponent("golden/\(name)"), encoding: .utf8)
        #expect(stable == golden)
    }

    @Test func listPrintsOneAlignedRowPerReportNewestFirst() throws {
        let (code, output) = CapturedConsole.run(["reports", "list", reports])
        #expect(code == .ok)
        #expect(output.standardError == "")
        try expectGolden(output.standardOutput, "list.txt")
    }

    @Test(arguments: ReportFixtures.all.map(\.name))
    func showPrintsHeaderSamplesImagesAndCapture(name: String) throws {
        let (code, output) = CapturedConsole.run(["reports", "show", "\(reports)/\(name).json"])
        #expect(code == .ok)
        try expectGolden(output.standardOutput, "show-\(name).txt")
    }

    @Test func showFindsAReportByUniqueIdPrefixInADirectory() {
        let (code, output) = CapturedConsole.run(["reports", "show", "20261201T08", "--dir", reports])
        #expect(code == .ok)
        #expect(output.standardOutput.hasPrefix("Stall report 20261201T080000.000Z-977-1\n"))
    }

    @Test func anAmbiguousIdPrefixIsAUsageError() {
        let (code, output) = CapturedConsole.run(["reports", "show", "2026120", "--dir", reports])
        #expect(code == .usage)
        #expect(output.standardError.hasPrefix("stallwatch: id prefix 2026120 matches 2 reports"))
    }

    @Test func anUnknownIdIsNotFound() {
        let (code, output) = CapturedConsole.run(["reports", "show", "19990101", "--dir", reports])
        #expect(code == .notFound)
        #expect(output.standardError.hasPrefix("stallwatch: no report with id 19990101"))
    }

    @Test func aNamedFileThatIsNotAReportIsAFailure() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("sw-cli-\(UUID().uuidString).json")
        try Data("{\"schemaVersion\": 1, \"id\": ".utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let (code, output) = CapturedConsole.run(["reports", "show", file.path])
        #expect(code == .failure)
        #expect(output.standardError == "stallwatch: \(file.path): truncated JSON (27 bytes)\n")
        #expect(CapturedConsole.run(["reports", "show", file.path + ".missing"]).0 == .notFound)
    }

    @Test func showJSONEmitsTheReportAsStored() throws {
        let (code, output) = CapturedConsole.run(["reports", "show", "\(reports)/stall-ended.json", "--json"])
        #expect(code == .ok)
        let stored = try String(contentsOfFile: "\(reports)/stall-ended.json", encoding: .utf8)
        #expect(output.standardOutput == stored)
    }

    @Test func listJSONIsAnArrayOfSummariesNewestFirst() throws {
        let (code, output) = CapturedConsole.run(["reports", "list", reports, "--json"])
        #expect(code == .ok)
        let summaries = try StallReport.makeDecoder().decode([ReportSummary].self, from: Data(output.standardOutput.utf8))
        #expect(summaries.map(\.id) == [
            "20261201T090000.500Z-4242-7", "20261201T080000.000Z-977-1", "20261130T221500.123Z-4242-3",
        ])
        #expect(summaries[0].topFrame == "ChatDemo.Store.save() throws -> () + 40", "machinery frames skipped")
        #expect(summaries[1].topFrame == "libc.so.6 + 0xa1000", "image + offset without symbols")
        #expect(summaries[2].path == "\(reports)/stall-ended.json")
    }

    @Test func anEmptyDirectoryHasNoReports() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("sw-empty-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let (code, output) = CapturedConsole.run(["reports", "list", directory.path])
        #expect(code == .notFound)
        #expect(output.standardOutput == "")
        #expect(output.standardError == "stallwatch: no reports in \(directory.path)\n")
    }

    @Test(arguments: [
        ["reports"], ["reports", "list", "--bogus"], ["reports", "show"], ["reports", "list", "a", "b"], ["frobnicate"],
        ["reports", "show", "x", "--dir"],
    ])
    func badCommandLinesAreUsageErrors(arguments: [String]) {
        let (code, output) = CapturedConsole.run(arguments)
        #expect(code == .usage)
        #expect(output.standardError.hasPrefix("stallwatch: "))
    }

    @Test func helpListsTheCommandsAndEveryExitCode() {
        let (code, output) = CapturedConsole.run(["--help"])
        #expect(code == .ok)
        #expect(output.standardOutput.contains("stallwatch reports list [DIR] [--json]"))
        for exit in ExitCode.allCases { #expect(output.standardOutput.contains("  \(exit.rawValue)  \(exit.meaning)")) }
    }

    @Test func colourIsOnlyUsedWhenAsked() {
        let view = ReportListView(format: ReportTextFormat(timeZone: TimeZone(identifier: "UTC")!), useColor: true)
        let summary = ReportSummary(path: "x", report: ReportFixtures.unrecoveredHang)
        #expect(view.lines([summary]).joined().contains("\u{1B}[31m"))
        #expect(Console.standard(environment: ["NO_COLOR": "1"]).useColor == false)
    }
}
