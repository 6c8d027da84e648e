// A hung-await report in every view: `reports show` (golden), its JSON, the summary by cause, the HTML page.
import Foundation
import StallWatchTestSupport
import Testing

@testable import StallWatch
@testable import StallWatchCommands
@testable import StallWatchInspector

@Suite(.offPool) struct HungAwaitReportViewTests {
    static let path = ReportFixtures.directory.appendingPathComponent("diagnosed/hung-await.json").path

    @Test func showPrintsTheTaskItsWaitTheChainAndTheAsyncBacktrace() throws {
        let (code, output) = CapturedConsole.run(["reports", "show", Self.path])
        #expect(code == .ok)
        try ReportsCLITests().expectGolden(
            output.standardOutput.replacingOccurrences(of: Self.path, with: "<fixtures>/hung-await.json"),
            "show-hung-await.txt")
        let text = output.standardOutput
        #expect(text.contains("hungAwait"))
        #expect(text.contains("8812 \"request 311\""))
        #expect(text.contains("8790 \"profile-cache refill\": suspended, waits on a continuation"))
        #expect(text.contains("fetchProfile"))
    }

    @Test func theJSONViewKeepsTheSection() throws {
        let (code, output) = CapturedConsole.run(["reports", "show", Self.path, "--json"])
        #expect(code == .ok)
        let report = try StallReport.makeDecoder().decode(StallReport.self, from: Data(output.standardOutput.utf8))
        #expect(report.hungAwait == ReportFixtures.hungAwait.hungAwait)
        #expect(report.cause?.kind == .hungAwait)
        #expect(report.task?.name == "request 311")
    }

    @Test func theSummaryByCauseCountsHungAwaits() {
        let directory = ReportFixtures.directory.appendingPathComponent("diagnosed").path
        let (code, output) = CapturedConsole.run(["reports", "summary", directory, "--by", "cause"])
        #expect(code == .ok)
        #expect(output.standardOutput.contains("hungAwait"), "\(output.standardOutput)")
        let (listed, list) = CapturedConsole.run(["reports", "list", directory, "--cause", "hungAwait"])
        #expect(listed == .ok)
        #expect(list.standardOutput.contains("20261201T110000.000Z-4242-12"))
    }

    @Test func theHTMLPageShowsTheHungAwaitSection() {
        var page = HTMLReport()
        page.add(ReportFixtures.hungAwait, path: "hung-await.json")
        let html = page.render()
        #expect(html.contains("<h3>Hung await</h3>"))
        #expect(html.contains(HTMLReportEscaping.escape("8790 \"profile-cache refill\": suspended")))
        #expect(html.contains("<th>awaited task</th>"))
    }

    @Test func aHostileTaskNameIsEscapedForTheTerminal() {
        var report = ReportFixtures.hungAwait
        report.task?.name = "evil\u{1b}]0;title\u{07}"
        report.hungAwait?.chain[0].name = "\u{1b}[2J"
        let text = ReportDetailView(format: ReportTextFormat(timeZone: TimeZone(identifier: "UTC")!), useColor: false)
            .lines(report).joined(separator: "\n")
        #expect(!text.contains("\u{1b}"))
    }
}
