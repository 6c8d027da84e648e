// The sidecar started while a loop sits in an idle wait that looks busy: its report is withdrawn once the loop turns.
import Foundation
import StallWatch
import StallWatchTestSupport
import Testing

@testable import StallWatchSidecar

#if canImport(Glibc)
    import Glibc
#endif

/// A loop whose event source is a pipe it reads with a blocking read (`stuck_service pipe-loop`): watched from the
/// middle of that read, it looks like a loop stuck reading a pipe nobody writes, and is reported. When the loop
/// gets an event, works and reads again, that read proves to be its idle wait.
@Suite(.offPool, .serialized) struct CorpusArrivalWithdrawalTests {
    /// Attached 1 s into the read: one report, begun before watching; after one turn of the loop it is
    /// `withdrawn` (file and event line), and the read, now learned, gives no further report over another turn
    /// and 2 s (8 thresholds) of idling in it.
    @Test(.timeLimit(.minutes(2)))
    func anIdleReadTakenForAStallIsWithdrawnOnceTheLoopComesBackToIt() throws {
        let binary = try #require(CorpusArrivalTests.binary, "cc could not build the fixture")
        let directory = SidecarFixtures.temporaryDirectory("arrival-withdrawn")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let target = try Spawned(binary, ["pipe-loop"])
        defer { kill(target.pid, SIGKILL) }
        try #require(target.waitFor("READY"), "the pipe loop did not start: \(target.stderr)")
        // Idle in its read for a while before anyone watches: longer than the threshold.
        let readyAt = TracingMonitor.now()
        while TracingMonitor.now() < readyAt + 1_000_000_000 { usleep(10_000) }
        let (watcher, events, done, badStates) = try SidecarIntegrationTests.watch(
            CorpusArrivalTests.options(pid: target.pid, directory))
        let reported = pollUntil(timeout: .seconds(10), every: .milliseconds(10)) {
            !SidecarFixtures.reports(in: directory).isEmpty
        }
        try #require(reported, "the read was not reported at first")
        kill(target.pid, SIGUSR1)
        try #require(target.waitFor("WORKED"), "the loop did not work: \(target.stderr)")
        let withdrawn = pollUntil(timeout: .seconds(10), every: .milliseconds(10)) {
            SidecarFixtures.reports(in: directory).first?.status == .withdrawn
        }
        // Another turn, then a long idle time in the read.
        kill(target.pid, SIGUSR1)
        let turnedAgain = target.waitFor("WORKED\nWORKED")
        usleep(2_000_000)
        kill(target.pid, SIGTERM)
        let status = target.wait(timeout: .seconds(10))
        watcher.stop()
        #expect(done.wait(timeout: .now() + 10) == .success)
        #expect(status == 0, "the pipe loop exited with \(String(describing: status)): \(target.stderr)")
        #expect(turnedAgain, "the loop did not turn a second time: \(target.stdout)")
        #expect(badStates.withLock { $0 }.isEmpty, "target stopped or traced: \(badStates.withLock { $0 })")
        let reports = SidecarFixtures.reports(in: directory)
        try #require(withdrawn, "not withdrawn: \(reports.map(CorpusHarness.describe))")
        try #require(reports.count == 1, "\(reports.map(CorpusHarness.describe))")
        let report = reports[0]
        #expect(report.status == .withdrawn)
        #expect(report.startedBeforeAttach == true, "\(CorpusHarness.describe(report))")
        #expect(report.notes.contains { $0.hasPrefix("withdrawn:") }, "\(report.notes)")
        let stallEvents = events.withLock { $0 }.compactMap { event -> StallEvent? in
            if case .stall(let stall) = event { return stall }
            return nil
        }
        let began = stallEvents.filter { if case .began = $0 { true } else { false } }
        let ended = stallEvents.compactMap { event -> StallReport? in
            if case .ended(let report) = event { return report }
            return nil
        }
        #expect(began.count == 1 && ended.count == 1, "\(stallEvents)")
        let line = try #require(ended.first.flatMap { JSONLinesEventWriter.fields(for: .ended($0)) })
        #expect(line["status"] == .string("withdrawn") && line["withdrawn"] == .int(1), "\(line)")
    }
}
