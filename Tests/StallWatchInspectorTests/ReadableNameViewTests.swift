// Every human view and export names frames in the short style: list, show, summary, HTML, folded, speedscope, pprof.
import Foundation
import StallWatchTestSupport
import Testing

@testable import StallWatch
@testable import StallWatchInspector

@Suite(.offPool) struct ReadableNameViewTests {
    static let full =
        "function signature specialization <Arg[1] = Dead> of static ChatDemo.SessionList.sortAndFilter(limit: Swift.Int) -> ()"
    static let short = "specialized static SessionList.sortAndFilter(limit:)"

    /// The ended-stall fixture with its application frame given both names.
    static var report: StallReport {
        var report = ReportFixtures.endedStall
        for index in report.samples.indices {
            report.samples[index].frames = report.samples[index].frames.map { frame in
                guard frame.symbol?.contains("sortAndFilter") == true else { return frame }
                var named = frame
                named.symbol = full
                named.shortSymbol = short
                return named
            }
        }
        report.pointStack = StallReport.PointStack(frames: report.samples[0].frames, count: 2)
        return report
    }

    @Test func listSummaryAndShowUseTheShortName() throws {
        let summary = ReportSummary(path: "x.json", report: Self.report)
        #expect(summary.topFrame == Self.short + " + 86")
        let listed = ReportListView().lines([summary]).joined(separator: "\n")
        #expect(listed.contains(Self.short))
        #expect(!listed.contains("function signature"))
        var grouper = StallGrouper(by: .frame)
        grouper.add(Self.report, path: "x.json")
        #expect(grouper.groups().map(\.key) == [Self.short])
        let shown = ReportDetailView().lines(Self.report).joined(separator: "\n")
        #expect(shown.contains(Self.short))
        #expect(!shown.contains("function signature"))
    }

    @Test func exportsAndTheHTMLPageUseTheShortName() throws {
        for format in ProfileFormat.allCases where format != .pprof {
            var exporter = format.makeExporter()
            exporter.add(Self.report)
            let text = String(decoding: try exporter.data(), as: UTF8.self)
            #expect(text.contains(Self.short), "\(format)")
            #expect(!text.contains("function signature"), "\(format)")
        }
        var page = HTMLReport()
        page.add(Self.report, path: "x.json")
        let html = page.render()
        #expect(html.contains(Self.short))
        #expect(!html.contains("function signature"))
    }
}
