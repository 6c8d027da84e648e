// Deduplication never loses a hang or a much longer stall; folded reports keep the longest and the total.
import Foundation
import StallWatchTestSupport
import Testing

@testable import StallWatch

@Suite(.offPool) struct DeduplicationIntegrityTests {
    static let second: UInt64 = 1_000_000_000

    @Test func aHangIsNeverFoldedNorAStallMoreThanTwiceAsLong() {
        var dedup = StallDeduplicator(windowNanos: 3600 * Self.second, maxPerHour: 100)
        #expect(dedup.decide(signature: "aa", reportID: "r1", now: 0, durationMs: 434) == .writeNew)
        #expect(
            dedup.decide(signature: "aa", reportID: "r2", now: Self.second, severity: .hang, durationMs: 6500)
                == .writeNew)
        // Later repeats fold into the hang's report, the most recent one written for the signature.
        #expect(
            dedup.decide(signature: "aa", reportID: "r3", now: 2 * Self.second, durationMs: 400)
                == .fold(reportID: "r2", occurrences: 2))
        #expect(dedup.decide(signature: "bb", reportID: "b1", now: 0, durationMs: 300) == .writeNew)
        #expect(
            dedup.decide(signature: "bb", reportID: "b2", now: Self.second, durationMs: 600)
                == .fold(reportID: "b1", occurrences: 2), "twice as long still folds")
        #expect(dedup.decide(signature: "bb", reportID: "b3", now: 2 * Self.second, durationMs: 601) == .writeNew)
    }

    @Test func aFoldedReportKeepsTheLongestAndTheTotalDuration() throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        var configuration = StallWatchConfiguration()
        configuration.reportDirectory = directory.path
        var publisher = StallPublisher(configuration: configuration, emit: { _ in })
        for (index, duration) in [300.0, 550, 420].enumerated() {
            var report = ReportSamples.report(id: "r\(index)")
            report.durationMs = duration
            report.occurrences = 1
            _ = publisher.publishFinal(report, now: UInt64(index) * Self.second)
        }
        #expect(try directory.names() == [ReportWriter.fileName(forReportID: "r0")])
        let kept = try ReportStore.load(path: directory.file(ReportWriter.fileName(forReportID: "r0")))
        #expect(kept.durationMs == 300)
        #expect(kept.occurrences == 3)
        #expect(kept.maxDurationMs == 550)
        #expect(kept.totalDurationMs == 1270)
        try Fixtures.expectReportsValidate(in: directory.path)
    }

    /// The field case: a long hang whose stack matches a short stall seconds earlier, with a real watchdog.
    @Test(.timeLimit(.minutes(3)))
    func aHangAfterASameStackStallIsOnDiskAsAHangWithItsSamples() throws {
        let directory = Fixtures.temporaryDirectory("hang-after-stall")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var configuration = StallWatchConfiguration()
        configuration.reportDirectory = directory
        configuration.thresholdMs = 100
        configuration.hangThresholdMs = 600
        configuration.sampleIntervalMs = 20
        configuration.maxThreads = 0
        let loop = try EventLoop(name: "dedup", mainQueue: .disabled)
        let ended = DispatchSemaphore(value: 0)
        let watchdog = Watchdog(loop: loop, configuration: configuration) { if case .ended = $0 { ended.signal() } }
        try watchdog.start()
        _ = startLoopThread(loop)
        loop.perform { Self.sameStack(milliseconds: 250) }
        #expect(ended.wait(timeout: .now() + 20) == .success)
        loop.perform { Self.sameStack(milliseconds: 1200) }
        #expect(ended.wait(timeout: .now() + 20) == .success)
        loop.stop()
        watchdog.stop()

        let reports = try Fixtures.reports(in: directory).sorted { $0.startedAt < $1.startedAt }
        #expect(reports.count == 2, "\(reports.map { "\($0.severity) \($0.durationMs)" })")
        let hang = try #require(reports.last)
        #expect(hang.severity == .hang)
        #expect(hang.durationMs >= 1000)
        #expect(hang.samples.count >= 20, "the hang keeps its own samples: \(hang.samples.count)")
        #expect(hang.samples.contains { $0.frames.contains { $0.symbol?.contains("sameStack") == true } })
        #expect(reports.first?.severity == .stall)
    }

    @inline(never)
    static func sameStack(milliseconds: Int) {
        WatchdogTests.blockLoopThread(milliseconds: milliseconds)
    }
}
