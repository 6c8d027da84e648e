// A report's `leadUp` section read back: both versions keep it, and a damaged one is refused naming the field.
import Foundation
import StallWatchTestSupport
import Testing

@testable import StallWatch

@Suite(.offPool) struct LeadUpReportTests {
    static func decode(_ report: StallReport, version: Int) throws -> StallReport {
        let data = version == 1 ? try report.expandedJSON() : try report.encodedJSON()
        return try StallReport.makeDecoder().decode(StallReport.self, from: data)
    }

    @Test(arguments: [1, 2])
    func theLeadUpRoundTripsInEachVersion(version: Int) throws {
        let report = ReportFixtures.diagnosedLock
        try #require(report.leadUp != nil)
        #expect(try Self.decode(report, version: version).leadUp == report.leadUp)
    }

    @Test(arguments: [1, 2])
    func aBucketColumnOfAnotherLengthIsRefusedNamingIt(version: Int) throws {
        var report = ReportFixtures.diagnosedLock
        report.leadUp?.buckets.cpuMs.removeLast()
        #expect {
            _ = try Self.decode(report, version: version)
        } throws: { error in
            "\(error)".contains("leadUp.buckets.cpuMs")
        }
    }

    @Test func moreItemsThanAWriterKeepsAreRefused() throws {
        var report = ReportFixtures.diagnosedLock
        let item = StallReport.LeadUp.Item(startMs: -1, durationMs: 1)
        report.leadUp?.items = Array(repeating: item, count: StallReport.LeadUp.maxItems + 1)
        #expect {
            _ = try Self.decode(report, version: 2)
        } throws: { error in
            "\(error)".contains("leadUp.items")
        }
    }

    @Test func aNegativeOrHugeTimeIsRefused() throws {
        var report = ReportFixtures.diagnosedLock
        report.leadUp?.buckets.busyMs[3] = -5
        #expect(throws: (any Error).self) { _ = try Self.decode(report, version: 1) }
        report = ReportFixtures.diagnosedLock
        report.leadUp?.inFlight?.durationMs = 1e15
        #expect(throws: (any Error).self) { _ = try Self.decode(report, version: 2) }
    }
}
