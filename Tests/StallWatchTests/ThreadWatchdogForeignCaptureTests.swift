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
    /// Whose all-thread snapshots stop the stuck thread.
    enum Snapshotter: String, CustomStringConvertible {
        /// A second watchdog of the process, over an `EventLoop` of its own (``OtherWatcher``).
        case anotherWatchdog
        /// The same thread watchdog, for another thread it follows (its snapshot is taken on the same watching
        /// thread as the stuck thread's looks).
        case theSameWatcherForAnotherThread
        var description: String { rawValue }
    }

    /// A loop that idles in a blocking pipe read; byte 2 is a turn stuck in a read of another pipe until the test
    /// writes to it. While it is stuck, three stalls of another loop are reported — by a second watchdog of the
    /// process, or by the same thread watchdog for a second pipe loop that spins 400 ms of CPU on byte 3 — and their
    /// all-thread snapshots stop the stuck thread (each stop restarts its read: one more read call and two
    /// more voluntary switches in its counters). The thread watchdog reports the stuck read as one stall, ended,
    /// that lasts the read's whole time (the loop's own clock) less at most one look.
    @Test(.timeLimit(.minutes(2)), arguments: [Snapshotter.anotherWatchdog, .theSameWatcherForAnotherThread])
    func snapshotsOfAStuckThreadForAnotherLoopDoNotSplitItsStall(by snapshotter: Snapshotter) throws {
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
        let spinner =
            snapshotter == .theSameWatcherForAnotherThread
            ? try ThreadWatchdogWithdrawalTests.PipeReadLoop(name: "held-elt-1") { byte in
                guard byte == 3 else { return }
                let end = ThreadWatchdogWithdrawalTests.PipeReadLoop.threadCPUNanos() + 400_000_000
                while ThreadWatchdogWithdrawalTests.PipeReadLoop.threadCPUNanos() < end {}
            } : nil
        defer { spinner?.stop() }
        loop.sitInRead()
        spinner?.sitInRead()

        let events = ThreadWatchdogWithdrawalTests.WatchedEvents()
        // Every stall of the spinner its own report, with its snapshot.
        let watchdog = try events.watch("held-elt-*", directory: directory) { $0.dedupWindowMs = 0 }
        defer { watchdog.stop() }
        // The premise: the watcher knows each loop's read as its idle wait.
        let turns = try loop.turnUntilTheReadIsLearned(events)
        let spinnerTurns = try spinner?.turnUntilTheReadIsLearned(events) ?? 0
        let tid = loop.threadID.load(ordering: .acquiring)
        let stuckReports = { (reports: [StallReport]) in reports.filter { $0.loop.threadId == tid } }
        let beganBefore = stuckReports(events.began.values).count
        let endedBefore = stuckReports(events.ended.values).count

        let other = snapshotter == .anotherWatchdog ? try OtherWatcher(directory: otherDirectory) : nil
        defer { other?.stop() }

        loop.send(2)
        try #require(
            pollUntil(timeout: .seconds(10), every: .milliseconds(10)) {
                stuckReports(events.began.values).count == beganBefore + 1
            }, "the stuck read was not reported")
        if let other {
            other.stallThreeTimes()
        } else if let spinner {
            let spinnerID = spinner.threadID.load(ordering: .acquiring)
            for turn in 1...3 {
                spinner.send(3)
                let done = spinnerTurns + turn
                #expect(pollUntil(timeout: .seconds(20)) { spinner.turns.load(ordering: .acquiring) == done })
                #expect(
                    pollUntil(timeout: .seconds(20), every: .milliseconds(10)) {
                        events.endedNotWithdrawn.filter { $0.loop.threadId == spinnerID }.count == turn
                    },
                    "turn \(turn): \(events.began.values.count) began; ended: \(Self.summary(events.ended.values))"
                )
            }
        }
        var release: UInt8 = 1
        _ = write(stuck[1], &release, 1)
        #expect(pollUntil(timeout: .seconds(10)) { loop.turns.load(ordering: .acquiring) == turns + 1 })
        try #require(
            pollUntil(timeout: .seconds(10), every: .milliseconds(10)) {
                stuckReports(events.ended.values).count > endedBefore
            }, "the stuck read's stall did not end")
        usleep(300_000)  // three thresholds more: any further report of the turn would have begun by now

        // The snapshots did stop the stuck thread (the case's premise).
        let snapshots = try Fixtures.reports(in: other == nil ? directory : otherDirectory).filter {
            $0.loop.threadId != tid && $0.status != .withdrawn
        }
        OtherWatcher.expectSnapshotsStopped(tid, in: snapshots)

        let reports = stuckReports(events.ended.values).dropFirst(endedBefore)
        let seen = reports.map { "\($0.status) \($0.durationMs) ms \($0.cause?.kind.rawValue ?? "-"): \($0.notes)" }
        let began = stuckReports(events.began.values).count - beganBefore
        #expect(began == 1 && reports.count == 1, "\(began) began, \(reports.count) ended: \(seen)")
        let report = try #require(reports.first)
        #expect(report.status == .ended)
        let span = readSpan.withLock { $0 }
        let readMs = Double(span.end - span.start) / 1e6
        // The stall begins when the thread left its idle wait (dated from its own figures) and ends at the first
        // look that sees it back in that wait: never shorter than the read by more than one look (50 ms).
        #expect(report.durationMs >= readMs - 50, "the read took \(readMs) ms; \(seen)")
    }

    /// Each report's thread, status, duration and notes.
    static func summary(_ reports: [StallReport]) -> [String] {
        reports.map { "\($0.loop.threadId) \($0.status) \($0.durationMs) ms: \($0.notes)" }
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

        try other.expectSnapshotsStopped(loop.threadID.load(ordering: .acquiring))
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

        /// Three stalls of 400 ms of the loop, each waited for to end.
        func stallThreeTimes() {
            for _ in 0..<3 {
                loop.perform { WatchdogTests.blockLoopThread(milliseconds: 400) }
                #expect(ended.wait(timeout: .now() + .seconds(20)) == .success)
            }
        }

        /// The premise of the cases: three reports, and at least one holds thread `tid`'s stack — its snapshot
        /// stopped the thread. (A snapshot goes thread by thread and ends with the stall: in a busy test process of
        /// hundreds of threads, one may end before it reaches `tid`, and say so.)
        func expectSnapshotsStopped(_ tid: Int32) throws {
            Self.expectSnapshotsStopped(tid, in: try Fixtures.reports(in: directory))
        }

        /// Three `reports`, at least one holding thread `tid`'s stack.
        static func expectSnapshotsStopped(_ tid: Int32, in reports: [StallReport]) {
            let stopped = reports.filter { report in
                report.threads?.contains { $0.threadId == tid && !$0.frames.isEmpty } == true
            }
            let missing = reports.map { $0.threads?.first { $0.threadId == tid }?.error ?? "absent or captured" }
            #expect(
                reports.count == 3 && !stopped.isEmpty,
                "\(reports.count) reports, \(stopped.count) with thread \(tid)'s stack: \(missing)")
        }

        func stop() {
            loop.stop()
            watchdog.stop()
        }
    }
}
