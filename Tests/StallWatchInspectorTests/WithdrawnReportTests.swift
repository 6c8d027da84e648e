// A report withdrawn because its wait proved to be the loop's idle wait: every view says it is no stall.
import Foundation
import StallWatchTestSupport
import Testing

@testable import StallWatch
@testable import StallWatchCommands
@testable import StallWatchInspector

@Suite(.offPool) struct WithdrawnReportTests {
    @Test func showListSummaryAndHTMLSayTheReportIsWithdrawnAndNoStall() throws {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("sw-withdrawn-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("stall-withdrawn.json").path
        try ReportFixtures.withdrawnStall.encodedJSON().write(to: URL(fileURLWithPath: path))
        let show = CapturedConsole.run(["reports", "show", path]).1.standardOutput
        #expect(show.contains("stall, withdrawn") && show.contains("not a stall"), "\(show)")
        let list = CapturedConsole.run(["reports", "list", path]).1.standardOutput
        #expect(list.contains("withdrawn"), "\(list)")
        let summary = CapturedConsole.run(["reports", "summary", path]).1.standardOutput
        #expect(summary.contains("0 (+1 withdrawn)"), "\(summary)")
        let summaryJSON = CapturedConsole.run(["reports", "summary", path, "--json"]).1.standardOutput
        #expect(summaryJSON.contains("\"withdrawn\" : 1") && summaryJSON.contains("\"count\" : 0"), "\(summaryJSON)")
        let html = directory.appendingPathComponent("r.html").path
        #expect(CapturedConsole.run(["reports", "html", path, "-o", html]).0 == .ok)
        let page = try String(contentsOfFile: html, encoding: .utf8)
        #expect(page.contains("Withdrawn") && page.contains("not a stall"))
        let json = CapturedConsole.run(["reports", "show", path, "--json"]).1.standardOutput
        #expect(json.contains("\"status\" : \"withdrawn\""), "\(json)")
        #expect(try ReportStore.load(path: path).status == .withdrawn)
    }

    @Test func theEndedEventLineSaysWithdrawnAndItsTextSaysNoStall() throws {
        let report = ReportFixtures.withdrawnStall
        let ended = try #require(JSONLinesEventWriter.fields(for: .ended(report)))
        #expect(ended["status"] == .string("withdrawn") && ended["withdrawn"] == .int(1))
        let text = EventOutput.text(ended, reportDirectory: "/r")
        #expect(text.hasPrefix("stall withdrawn:"), "\(text)")
        let plain = try #require(JSONLinesEventWriter.fields(for: .ended(ReportFixtures.endedStall)))
        #expect(plain["withdrawn"] == nil)
    }
}
