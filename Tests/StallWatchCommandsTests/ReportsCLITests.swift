// Tests of `stallwatch reports list|show`: golden text on the fixtures, JSON output, exit codes, usage errors.
import Foundation
import StallWatchTestSupport
import Testing

@testable import StallWatch
@testable import StallWatchCommands
@testable import StallWatchInspector

@Suite(.offPool) struct ReportsCLITests {
    let reports = ReportFixtures.reportsDirectory.path

    /// Compares with Fixtures/golden/<name>, with the fixtures' directory written as `<fixtures>`.
    func expectGolden(_ text: String, _ name: String) throws {
        let stable = text.replacingOccurrences(of: reports, with: "<fixtures>")
        if ReportFixtures.updating {
            try stable.write(
                to: ReportFixtures.sourceDirectory.appendingPathComponent("golden/\(name)"), atomically: true,
                encoding: .utf8)
        }
        let golden = try String(
            contentsOf: ReportFixtures.directory.appendingPathComponent("golden/\(name)"), encoding: .utf8)
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

    @Test(arguments: ReportFixtures.diagnosed.map(\.name))
    func showPrintsCauseEvidenceContextAndTheBlockingThread(name: String) throws {
        let path = ReportFixtures.directory.appendingPathComponent("diagnosed/\(name).json").path
        let (code, output) = CapturedConsole.run(["reports", "show", path])
        #expect(code == .ok)
        try expectGolden(
            output.standardOutput.replacingOccurrences(of: path, with: "<fixtures>/\(name).json"), "show-\(name).txt")
        let (allCode, all) = CapturedConsole.run(["reports", "show", path, "--all-threads"])
        #expect(allCode == .ok)
        #expect(all.standardOutput.contains("Threads (3)"))
        #expect(all.standardOutput.contains("the thread blocks the sampling signal"))
    }

    @Test func listShowsTheCauseAndFiltersByIt() throws {
        let directory = ReportFixtures.directory.appendingPathComponent("diagnosed").path
        let (code, output) = CapturedConsole.run(["reports", "list", directory, "--cause", "lock"])
        #expect(code == .ok)
        #expect(output.standardOutput.contains("lock"))
        let (none, _) = CapturedConsole.run(["reports", "list", directory, "--cause", "io"])
        #expect(none == .notFound)
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
        let summaries = try StallReport.makeDecoder().decode(
            [ReportSummary].self, from: Data(output.standardOutput.utf8))
        #expect(
            summaries.map(\.id) == [
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
        ["reports"], ["reports", "list", "--bogus"], ["reports", "show"], ["reports", "show", "a", "b"], ["frobnicate"],
        ["reports", "show", "x", "--dir"], ["reports", "list", "--sort", "size"],
        ["reports", "list", "--since", "soon"],
        ["reports", "summary", "--by", "colour"], ["reports", "list", "--min-duration-ms", "-3"],
    ])
    func badCommandLinesAreUsageErrors(arguments: [String]) {
        let (code, output) = CapturedConsole.run(arguments)
        #expect(code == .usage)
        #expect(output.standardError.hasPrefix("stallwatch: "))
    }

    @Test func helpListsTheCommandsAndEveryExitCode() {
        let (code, output) = CapturedConsole.run(["--help"])
        #expect(code == .ok)
        #expect(output.standardOutput.contains("stallwatch reports list [DIR|FILE…]"))
        for exit in ExitCode.allCases { #expect(output.standardOutput.contains("  \(exit.rawValue)  \(exit.meaning)")) }
    }

    @Test func colourIsOnlyUsedWhenAsked() {
        let view = ReportListView(format: ReportTextFormat(timeZone: TimeZone(identifier: "UTC")!), useColor: true)
        let summary = ReportSummary(path: "x", report: ReportFixtures.unrecoveredHang)
        #expect(view.lines([summary]).joined().contains("\u{1B}[31m"))
        #expect(Console.standard(environment: ["NO_COLOR": "1"]).useColor == false)
    }
}

@Suite(.offPool) struct ReportsListAndSummaryTests {
    let reports = ReportFixtures.reportsDirectory.path

    @Test(arguments: StallGroup.Key.allCases)
    func summaryPrintsGroupsTheCostliestFirst(by key: StallGroup.Key) throws {
        let (code, output) = CapturedConsole.run(["reports", "summary", reports, "--by", key.rawValue])
        #expect(code == .ok)
        #expect(output.standardError == "")
        try ReportsCLITests().expectGolden(output.standardOutput, "summary-\(key.rawValue).txt")
    }

    @Test func summaryJSONHasTheGroupsAndTheirStatistics() throws {
        let (code, output) = CapturedConsole.run(["reports", "summary", reports, "--by", "cause", "--json"])
        #expect(code == .ok)
        let document = try StallReport.makeDecoder().decode(
            StallGroupView.Document.self, from: Data(output.standardOutput.utf8))
        #expect(document.by == .cause)
        #expect(document.reports == 3)
        #expect(document.skipped == 0)
        let group = try #require(document.groups.first)
        #expect(document.groups.count == 1)
        #expect(group.key == "unknown")
        #expect(group.count == 3)
        #expect(group.totalMs == 312.5 + 63250 + 251)
        #expect(group.p50Ms == 312.5)
        #expect(group.p95Ms == 63250)
        #expect(group.maxMs == 63250)
        #expect(group.hangs == 1)
        #expect(group.unrecovered == 1)
        #expect(group.latestId == "20261201T090000.500Z-4242-7")
        #expect(group.firstSeen == ReportFixtures.date("2026-11-30T22:15:00.123Z"))
    }

    @Test func percentilesUseTheNearestRank() {
        let values = (1...20).map(Double.init)
        #expect(StallGrouper.percentile(values, 0.5) == 10)
        #expect(StallGrouper.percentile(values, 0.95) == 19)
        #expect(StallGrouper.percentile([7], 0.95) == 7)
        #expect(StallGrouper.percentile([], 0.5) == 0)
    }

    @Test func listFiltersByStartDurationAndCause() throws {
        func ids(_ extra: [String]) throws -> [String] {
            let (_, output) = CapturedConsole.run(["reports", "list", reports, "--json"] + extra)
            return try StallReport.makeDecoder().decode([ReportSummary].self, from: Data(output.standardOutput.utf8))
                .map(\.id)
        }
        #expect(try ids(["--since", "2026-12-01"]) == ["20261201T090000.500Z-4242-7", "20261201T080000.000Z-977-1"])
        #expect(try ids(["--since", "2026-12-01 08:30"]) == ["20261201T090000.500Z-4242-7"])
        #expect(try ids(["--since", "2026-12-01T08:00:00Z"]).count == 2)
        #expect(
            try ids(["--min-duration-ms", "300"]) == ["20261201T080000.000Z-977-1", "20261130T221500.123Z-4242-3"])
        #expect(try ids(["--cause", "unknown"]).count == 3)
        #expect(try ids(["--cause", "lock"]).isEmpty)
        #expect(
            try ids(["--sort", "duration"]) == [
                "20261201T080000.000Z-977-1", "20261130T221500.123Z-4242-3", "20261201T090000.500Z-4242-7",
            ])
    }

    @Test func noMatchIsNotFoundAndSaysWhy() {
        let (code, output) = CapturedConsole.run(["reports", "list", reports, "--cause", "lock"])
        #expect(code == .notFound)
        #expect(output.standardError == "stallwatch: no reports match the filters (3 read in \(reports))\n")
    }

    @Test func sinceAcceptsDurationsBeforeNow() throws {
        let now = ReportFixtures.date("2026-12-01T10:00:00.000Z")
        let utc = TimeZone(identifier: "UTC")!
        #expect(ReportFilter.since("2h", now: now, timeZone: utc) == ReportFixtures.date("2026-12-01T08:00:00.000Z"))
        #expect(ReportFilter.since("90s", now: now, timeZone: utc) == ReportFixtures.date("2026-12-01T09:58:30.000Z"))
        #expect(ReportFilter.since("1w", now: now, timeZone: utc) == ReportFixtures.date("2026-11-24T10:00:00.000Z"))
        #expect(
            ReportFilter.since("2026-12-01 09:30:15", now: now, timeZone: utc)
                == ReportFixtures.date("2026-12-01T09:30:15.000Z"))
        #expect(ReportFilter.since("yesterday", now: now, timeZone: utc) == nil)
        #expect(ReportFilter.since("2026-13-01", now: now, timeZone: utc) == nil)
    }

    @Test func severalDirectoriesAndFilesAreListedTogether() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("sw-several-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        var copy = ReportFixtures.endedStall
        copy.id = "20261202T000000.000Z-1-1"
        copy.startedAt = ReportFixtures.date("2026-12-02T00:00:00.000Z")
        try copy.encodedJSON().write(to: directory.appendingPathComponent("stall-\(copy.id).json"))
        let (code, output) = CapturedConsole.run([
            "reports", "list", directory.path, "\(reports)/stall-ended.json", directory.path + "-missing", "--json",
        ])
        #expect(code == .ok)
        let summaries = try StallReport.makeDecoder().decode(
            [ReportSummary].self, from: Data(output.standardOutput.utf8))
        #expect(summaries.map(\.id) == [copy.id, "20261130T221500.123Z-4242-3"])
        #expect(output.standardError == "stallwatch: warning: \(directory.path)-missing does not exist\n")
    }
}
