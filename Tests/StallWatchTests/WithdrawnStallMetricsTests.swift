// A withdrawn report (its wait proved to be the loop's idle wait) is no stall for the metrics.
import StallWatchTestSupport
import Testing

@testable import StallWatch

@Suite(.offPool) struct WithdrawnStallMetricsTests {
    @Test func aWithdrawnReportIsNotCountedAsAStallAndAnEndedOneIs() {
        let metrics = StallMetrics()
        var report = ReportSamples.report(id: "withdrawn-1")
        report.status = .withdrawn
        metrics.observe(.began(report))
        metrics.observe(.ended(report))
        #expect(!metrics.exposition().contains("stallwatch_stalls_total{"), "\(metrics.exposition())")
        report.id = "ended-1"
        report.status = .ended
        metrics.observe(.began(report))
        metrics.observe(.ended(report))
        #expect(metrics.exposition().contains("stallwatch_stalls_total{"), "\(metrics.exposition())")
    }
}
