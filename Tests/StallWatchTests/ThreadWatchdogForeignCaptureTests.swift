// The in-process named-thread watcher beside another watcher of the same process: the other's all-thread snapshots
// stop the watched thread too, and those stops are not the thread's progress.
import CStallWatchCore
import Dispatch
import Foundation
import StallWatchTestSupport
import Synchronization
import Testing

@testable import StallWatch

#if canImport(Glibc)
    import Glibc
#endif

@Suite(.offPool, .serialized) struct ThreadWatchdogForeignCaptureTests {
    /// A loop that idles in a blocking pipe read; byte 2 is a turn stuck in a read of another pipe until the test
    /// writes to it. While it is stuck, a second watchdog of the process (an `EventLoop`'s) reports three stalls of
    /// its own loop, and each of their all-thread snapshots stops the stuck thread (each stop restarts its read:
    /// one more read call and two more voluntary switches in its counters). The thread watchdog reports the stuck
    /// read as one stall, ended, that lasts the read's whole time (the loop's own clock) less at most one look.
    @Test(.timeLimit(.minutes(2)))
    func anotherWatchersSnapshotsOfAStuckThreadDoNotSplitItsStall() throws {
        let directory = Fixtures.temporaryDirectory("thread-watchdog-foreign")
        let otherDirectory = Fixtures.temporaryDirectory("thread-watchdog-foreign-other")
        defer {
            try? FileManager.default.removeItem(atPath: directory)
            try? FileManager.default.removeItem(atPath: otherDirectory)
        }
        var stuck: [Int32] = [0, 0]
        try #require(pipe(&stuck) == 0)
        defer {
            close(stuck[0])
            close(stuck[1])
        }
        let stuckRead = stuck[0]
        let readSpan = Mutex<(start: UInt64, end: UInt64)>((0, 0))
        let loop = try ThreadWatchdogWithdrawalTests.PipeReadLoop(name: "held-elt-0") { byte in
            guard byte == 2 else { return }
            let start = sw_monotonic_ns()
            var value: UInt8 = 0
            _ = read(stuckRead, &value, 1)
            let end = sw_monotonic_ns()
            readSpan.withLock { $0 = (start, end) }
        }
        defer { loop.stop() }

        let events = ThreadWatchdogWithdrawalTests.WatchedEvents()
        let watchdog = try events.watch("held-elt-*", directory: directory)
        defer { watchdog.stop() }
        // The premise: the watcher knows the loop's read as its idle wait.
        let turns = try loop.turnUntilTheReadIsLearned(events)
        let (began, ended) = (events.began, events.ended)
        let beganBefore = began.values.count
        let endedBefore = ended.values.count

        let other = try OtherWatcher(directory: otherDirectory)
        defer { other.stop() }

        loop.send(2)
        try #require(
            pollUntil(timeout: .seconds(10), every: .milliseconds(10)) { began.values.count == beganBefore + 1 },
            "the stuck read was not reported")
        other.stallThreeTimes()
        var release: UInt8 = 1
        _ = write(stuck[1], &release, 1)
        #expect(pollUntil(timeout: .seconds(10)) { loop.turns.load(ordering: .acquiring) == turns + 1 })
        try #require(
            pollUntil(timeout: .seconds(10), every: .milliseconds(10)) { ended.values.count > endedBefore },
            "the stuck read's stall did not end")
        usleep(300_000)  // three thresholds more: any further report of the turn would have begun by now

        try other.expectThreeSnapshotsStopped(loop.threadID.load(ordering: .acquiring))

        let reports = ended.values.dropFirst(endedBefore)
        let seen = reports.map { "\($0.status) \($0.durationMs) ms \($0.cause?.kind.rawValue ?? "-"): \($0.notes)" }
        #expect(
            began.values.count == beganBefore + 1 && reports.count == 1,
            "\(began.values.count - beganBefore) began, \(reports.count) ended: \(seen)")
        let report = try #require(reports.first)
        #expect(report.status == .ended)
        let span = readSpan.withLock { $0 }
        let readMs = Double(span.end - span.start) / 1e6
        // The stall begins when the thread left its idle wait (dated from its own figures) and ends at the first
        // look that sees it back in that wait: never shorter than the read by more than one look (50 ms).
        #expect(report.durationMs >= readMs - 50, "the read took \(readMs) ms; \(seen)")
    }

    /// Started 500 ms (five thresholds) into the loop's idle read, the watcher reports it (it cannot know the read is
    /// idle yet); the other watcher's three stalls stop the thread in that read before its first turn. Those stops
    /// are no work of the loop's: the report stays open until the turn, which then proves the read idle — one
    /// report, withdrawn, and none other.
    @Test(.timeLimit(.minutes(2)))
    func anotherWatchersSnapshotsBeforeTheFirstTurnLeaveTheReadToBeProvedIdle() throws {
        let directory = Fixtures.temporaryDirectory("thread-watchdog-foreign-first")
        let otherDirectory = Fixtures.temporaryDirectory("thread-watchdog-foreign-first-other")
        defer {
            try? FileManager.default.removeItem(atPath: directory)
            try? FileManager.default.removeItem(atPath: otherDirectory)
        }
        let loop = try ThreadWatchdogWithdrawalTests.PipeReadLoop(name: "first-elt-0")
        defer { loop.stop() }
        loop.sitInRead(nanos: 500_000_000)
        let events = ThreadWatchdogWithdrawalTests.WatchedEvents()
        let (began, ended) = (events.began, events.ended)
        let watchdog = try events.watch("first-elt-*", directory: directory)
        defer { watchdog.stop() }
        try #require(
            pollUntil(timeout: .seconds(10), every: .milliseconds(10)) { !began.values.isEmpty },
            "the read was not reported at first")
        let other = try OtherWatcher(directory: otherDirectory)
        defer { other.stop() }
        other.stallThreeTimes()
        // Not proved idle by the stops: the thread has done no work yet.
        let endedEarly = ended.values.map { "\($0.status) \($0.durationMs) ms: \($0.notes)" }
        #expect(endedEarly.isEmpty, "ended before the loop turned: \(endedEarly)")
        loop.send(1)
        #expect(pollUntil { loop.turns.load(ordering: .acquiring) == 1 })
        try #require(
            pollUntil(timeout: .seconds(10), every: .milliseconds(10)) { !ended.values.isEmpty },
            "the report did not end after the loop turned")
        usleep(300_000)  // three thresholds more: any further report would have begun by now

        try other.expectThreeSnapshotsStopped(loop.threadID.load(ordering: .acquiring))
        let seen = ended.values.map {
            "\($0.status) \($0.durationMs) ms \($0.cause?.kind.rawValue ?? "-"): \($0.notes)"
        }
        #expect(
            began.values.count == 1 && ended.values.count == 1,
            "\(began.values.count) began, \(ended.values.count) ended: \(seen)")
        #expect(ended.values.first?.status == .withdrawn, "\(seen)")
    }

    /// A second watchdog of the process, over an `EventLoop` of its own: every thread of the process in each of its
    /// stalls' snapshots, no stall folded into another.
    final class OtherWatcher: @unchecked Sendable {  // Used by the test's thread only; events land in a semaphore.
        let directory: String
        private let loop: EventLoop
        private let watchdog: Watchdog
        private let ended = DispatchSemaphore(value: 0)

        init(directory: String) throws {
            self.directory = directory
            var config = StallWatchConfiguration()
            config.thresholdMs = 100
            config.reportDirectory = directory
            config.maxThreads = 4096
            config.dedupWindowMs = 0
            config.leadUp = false
            loop = try EventLoop(name: "snapshotter", mainQueue: .disabled)
            let ended = ended
            watchdog = Watchdog(loop: loop, configuration: config) { event in
                if case .ended = event { ended.signal() }
            }
            try watchdog.start()
            let loop = loop
            Thread { loop.run() }.start()
        }

        /// Three stalls of 250 ms of the loop, each waited for to end.
        func stallThreeTimes() {
            for _ in 0..<3 {
                loop.perform { WatchdogTests.blockLoopThread(milliseconds: 250) }
                #expect(ended.wait(timeout: .now() + .seconds(20)) == .success)
            }
        }

        /// The premise of the cases: each of the three reports holds thread `tid`'s stack, so each snapshot stopped it.
        func expectThreeSnapshotsStopped(_ tid: Int32) throws {
            let reports = try Fixtures.reports(in: directory)
            let stopped = reports.filter { report in
                report.threads?.contains { $0.threadId == tid && !$0.frames.isEmpty } == true
            }
            let missing = reports.map { $0.threads?.first { $0.threadId == tid }?.error ?? "absent or captured" }
            #expect(
                stopped.count == 3, "\(reports.count) reports, \(stopped.count) with thread \(tid)'s stack: \(missing)")
        }

        func stop() {
            loop.stop()
            watchdog.stop()
        }
    }
}
