// The demo's lead-up kind: a stall whose report shows the long item that ran just before it.
import Foundation
import StallWatchTestSupport
import Testing

@testable import StallWatch

@Suite(.offPool, .serialized) struct LeadUpDemoTests {
    static let demo = Fixtures.executable("stallwatch-demo")

    @Test(.timeLimit(.minutes(3)))
    func theLeadUpDemosReportPutsWarmCachesFirstAmongTheItemsBeforeTheStall() throws {
        let directory = Fixtures.temporaryDirectory("lead-up-demo")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let result = try Fixtures.run(
            Self.demo, ["stall", "--kind", "lead-up", "--delay-ms", "300", "--report-dir", directory],
            timeout: .seconds(90))
        #expect(result.status == 0, "demo failed: \(result.stderr)")
        // A loaded machine may stretch warmCaches past the threshold into a report of its own: the stall of the
        // demo is the one stuck in stallOnCPU.
        let reports = try Fixtures.reports(in: directory)
        let report = try #require(
            reports.first { $0.leadUp?.inFlight?.label == "stallOnCPU" },
            "\(reports.map { ($0.id, $0.leadUp?.inFlight?.label) })")
        #expect(report.detection.thresholdMs == 500)
        let leadUp = try #require(report.leadUp)
        #expect(leadUp.topItems.first?.label == "warmCaches", "\(leadUp.topItems)")
        let warm = try #require(leadUp.items.last { $0.label == "warmCaches" })
        #expect(warm.durationMs >= 400)
        let stuck = try #require(leadUp.inFlight)
        #expect(warm.startMs + warm.durationMs <= stuck.startMs)
        #expect(leadUp.patterns.contains(.longItemBefore))
        #expect(report.samples.contains { $0.frames.contains { $0.symbol?.contains("stallOnCPU") == true } })
        try Fixtures.expectReportsValidate(in: directory)
    }
}
