// `reports summary` counts the stalls folded into a report, and their time, not one per file.
import Foundation
import StallWatchTestSupport
import Testing

@testable import StallWatch
@testable import StallWatchInspector

@Suite(.offPool) struct SummaryOccurrencesTests {
    @Test func groupsCountOccurrencesAndAddUpTheirTime() {
        var folded = ReportFixtures.endedStall
        folded.occurrences = 50
        folded.maxDurationMs = 900
        folded.totalDurationMs = 20_000
        var single = ReportFixtures.endedStall
        single.id = "single"
        single.durationMs = 400
        var grouper = StallGrouper(by: .signature)
        grouper.add(folded, path: "folded.json")
        grouper.add(single, path: "single.json")
        let group = grouper.groups()[0]
        #expect(group.count == 51)
        #expect(group.totalMs == 20_400)
        #expect(group.maxMs == 900)
        #expect(group.p50Ms == 312.5, "percentiles stay those of the reports' own durations")
    }

    @Test func aReportWithoutATotalCountsItsDurationForEachOccurrence() {
        var old = ReportFixtures.endedStall
        old.occurrences = 3
        var grouper = StallGrouper(by: .cause)
        grouper.add(old, path: "old.json")
        #expect(grouper.groups()[0].count == 3)
        #expect(grouper.groups()[0].totalMs == 3 * 312.5)
    }

    @Test func theSummaryCommandShowsTheStallsFoldedIntoAFile() throws {
        let directory = HostileFiles.temporaryDirectory("occurrences")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var folded = ReportFixtures.endedStall
        folded.occurrences = 50
        folded.totalDurationMs = 20_000
        try folded.encodedJSON().write(to: URL(fileURLWithPath: directory + "/folded.json"))
        let result = try HostileFiles.run(["reports", "summary", directory, "--json"])
        #expect(result.status == 0, "\(result.stderr)")
        let document = try StallReport.makeDecoder().decode(
            StallGroupView.Document.self, from: Data(result.stdout.utf8))
        #expect(document.groups.first?.count == 50)
        #expect(document.groups.first?.totalMs == 20_000)
        let text = try HostileFiles.run(["reports", "summary", directory])
        #expect(text.stdout.contains("1 report (50 stalls) in 1 group, 20.00 s stalled in all"), "\(text.stdout)")
    }

    @Test func theSummaryNamesWhatTheLatestReportOfEachGroupWaitedForOnlyWhenOneNamesIt() throws {
        let process = try #require(ReportFixtures.semaphoreHeldByProcess.cause?.blockingProcess)
        var grouper = StallGrouper(by: .cause)
        grouper.add(ReportFixtures.semaphoreHeldByProcess, path: "semaphore.json")
        grouper.add(ReportFixtures.likelyDeadlock, path: "deadlock.json")
        grouper.add(ReportFixtures.endedStall, path: "ended.json")
        let groups = grouper.groups()
        let byProcess = try #require(groups.first { $0.latestPath == "semaphore.json" })
        #expect(byProcess.blockedBy == "process \(process.processId) \(process.name)")
        let deadlock = try #require(groups.first { $0.latestPath == "deadlock.json" })
        #expect(deadlock.blockedBy?.hasPrefix("deadlock (likely): ") == true, "\(deadlock.blockedBy ?? "nil")")
        #expect(groups.first { $0.latestPath == "ended.json" }?.blockedBy == nil)
        let lines = StallGroupView().lines(groups, by: .cause)
        #expect(lines[0].contains("BLOCKED BY (LATEST)"))
        #expect(lines.contains { $0.contains("process \(process.processId)") })
        var plain = StallGrouper(by: .signature)
        plain.add(ReportFixtures.endedStall, path: "ended.json")
        #expect(!StallGroupView().lines(plain.groups(), by: .signature)[0].contains("BLOCKED BY"))
    }
}
