// A stall under way before watching started: every view says its start and duration are bounds.
import Foundation
import StallWatchTestSupport
import Testing

@testable import StallWatch
@testable import StallWatchCommands
@testable import StallWatchInspector

@Suite(.offPool) struct BeganBeforeWatchingTests {
    /// The ended fixture, as a watcher started mid-incident writes it.
    static func report(beganBefore: Bool) -> StallReport {
        var report = ReportFixtures.endedStall
        report.startedBeforeAttach = beganBefore ? true : nil
        return report
    }

    @Test func showListSummaryAndHTMLMarkTheDurationAsALowerBound() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("sw-before-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        for beganBefore in [true, false] {
            let path = directory.appendingPathComponent("stall-\(beganBefore).json").path
            try Self.report(beganBefore: beganBefore).encodedJSON().write(to: URL(fileURLWithPath: path))
            let show = CapturedConsole.run(["reports", "show", path]).1.standardOutput
            #expect(show.contains("began before watching started") == beganBefore, "\(show)")
            #expect(show.contains(">=") == beganBefore, "\(show)")
            let list = CapturedConsole.run(["reports", "list", path]).1.standardOutput
            #expect(list.contains(">=") == beganBefore, "\(list)")
            let listJSON = CapturedConsole.run(["reports", "list", path, "--json"]).1.standardOutput
            #expect(listJSON.contains("\"startedBeforeAttach\"") == beganBefore, "\(listJSON)")
            let summary = CapturedConsole.run(["reports", "summary", path]).1.standardOutput
            #expect(summary.contains(">=") == beganBefore, "\(summary)")
            let html = directory.appendingPathComponent("r-\(beganBefore).html").path
            #expect(CapturedConsole.run(["reports", "html", path, "-o", html]).0 == .ok)
            let page = try String(contentsOfFile: html, encoding: .utf8)
            #expect(page.contains("began before watching started") == beganBefore)
            let json = CapturedConsole.run(["reports", "show", path, "--json"]).1.standardOutput
            #expect(json.contains("\"startedBeforeAttach\" : true") == beganBefore, "\(json)")
            let reread = try ReportStore.load(path: path)
            #expect(reread.startedBeforeAttach == (beganBefore ? true : nil))
        }
    }

    @Test func theEventLinesCarryTheMarkAndTheLowerBound() throws {
        let report = Self.report(beganBefore: true)
        let began = try #require(JSONLinesEventWriter.fields(for: .began(report)))
        #expect(began["startedBeforeAttach"] == .int(1))
        let bound = report.detection.detectedAt.timeIntervalSince(report.startedAt) * 1000
        #expect(began["lowerBoundMs"] == .double(bound.rounded()))
        let ended = try #require(JSONLinesEventWriter.fields(for: .ended(report)))
        #expect(ended["startedBeforeAttach"] == .int(1))
        #expect(EventOutput.text(began, reportDirectory: "/r").contains("begun before watching started"))
        #expect(EventOutput.text(ended, reportDirectory: "/r").contains("at least "))
        let plain = try #require(JSONLinesEventWriter.fields(for: .began(Self.report(beganBefore: false))))
        #expect(plain["startedBeforeAttach"] == nil && plain["lowerBoundMs"] == nil)
    }
}
