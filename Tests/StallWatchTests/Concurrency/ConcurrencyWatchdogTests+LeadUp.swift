// The pool workers' lead-up: each worker's jobs in its own rings, labelled with their tasks, and a blocked worker's
// report holding its lead-up.
import CStallWatchConcurrency
import CStallWatchCore
import Foundation
import StallWatchTestSupport
import Synchronization
import Testing

@testable import StallWatch

extension ConcurrencyWatchdogTests {
    /// One job of the test as the job itself saw it: its task, its worker thread, and its own clock at its start
    /// and end.
    struct TimedJob: Sendable {
        var task: UInt64
        var thread: Int32
        var startNanos: UInt64
        var endNanos: UInt64
    }

    /// A job that spins on the clock for `milliseconds` and says where and when it ran.
    @inline(never)
    static func spinJob(milliseconds: UInt64) -> TimedJob {
        let start = sw_monotonic_ns()
        while sw_monotonic_ns() < start + milliseconds * 1_000_000 {}
        return TimedJob(
            task: ConcurrencyWatchdog.currentTaskID ?? 0, thread: sw_gettid(), startNanos: start,
            endNanos: sw_monotonic_ns())
    }

    /// The window of the lead-up rings of the worker that thread `tid` is, now; nil when no slot is that thread's or
    /// it has no rings.
    static func leadUpWindow(ofThread tid: Int32) -> LeadUpWindow? {
        var view = sw_pool_slot_view()
        for index in 0..<sw_pool_slot_count() where sw_pool_slot(index, &view) == 0 && view.thread_id == tid {
            guard let rings = sw_pool_slot_leadup(index) else { return nil }
            return LeadUpRing(borrowing: rings).window(endingAt: sw_monotonic_ns())
        }
        return nil
    }

    /// Six tasks at once, each one job spinning 40 ms: every job is an item in the rings of the worker that ran it
    /// (once that worker is past it: no longer its item in flight), labelled with its task's id, its duration within
    /// two ticks of the coarse clock the workers time jobs with (4 ms each way) of the job's own figure, and in no
    /// other worker's rings.
    @Test(.timeLimit(.minutes(1)))
    func eachJobIsAnItemOfItsOwnWorkersLeadUpLabelledWithItsTask() async throws {
        let directory = Fixtures.temporaryDirectory("pool-leadup-items")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var config = configuration(directory: directory)
        config.thresholdMs = 2_000
        config.leadUp = true
        try ConcurrencyWatchdog.enable(configuration: config) { _ in }
        defer { ConcurrencyWatchdog.disable() }

        let jobs = await withTaskGroup(of: TimedJob.self) { group in
            for _ in 0..<6 { group.addTask(priority: .low) { Self.spinJob(milliseconds: 40) } }
            return await group.reduce(into: [TimedJob]()) { $0.append($1) }
        }
        let threads = Set(jobs.map(\.thread))
        // A job's item is written by its worker after the job returns — after the task group may have resumed this
        // task on another worker: wait for every worker to be past its job (at most 10 s).
        func windowsNow() -> [Int32: LeadUpWindow?] {
            Dictionary(uniqueKeysWithValues: threads.map { ($0, Self.leadUpWindow(ofThread: $0)) })
        }
        func recorded(_ windows: [Int32: LeadUpWindow?]) -> Bool {
            jobs.allSatisfy { job in
                windows[job.thread]??.inFlight.map { $0.label != UInt32(job.task) } ?? true
            }
        }
        var windows = windowsNow()
        let deadline = ContinuousClock.now + .seconds(10)
        while !recorded(windows), ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(5))
            windows = windowsNow()
        }
        for job in jobs {
            try #require(job.task != 0 && job.task <= UInt64(UInt32.max))
            let window = try #require(windows[job.thread] ?? nil, "thread \(job.thread) has no lead-up rings")
            let items = window.items.filter { $0.label == UInt32(job.task) }
            try #require(items.count == 1, "task \(job.task): \(items.count) items on its worker \(job.thread)")
            let own = Double(job.endNanos - job.startNanos) / 1e6
            let recorded = Double(items[0].durationNanos) / 1e6
            #expect(abs(recorded - own) <= 8, "task \(job.task): recorded \(recorded) ms, ran \(own) ms")
            for other in threads where other != job.thread {
                #expect(windows[other]??.items.contains { $0.label == UInt32(job.task) } != true)
            }
        }
    }

    /// A job blocked past the threshold: its report's lead-up is its worker's, the stuck job in flight labelled
    /// with its task, there since at least the threshold (less a tick of the coarse clock) when the stall was seen.
    @Test(.timeLimit(.minutes(1)))
    func aBlockedWorkersReportHoldsItsLeadUpWithTheStuckJobInFlight() async throws {
        let directory = Fixtures.temporaryDirectory("pool-leadup-report")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var config = configuration(directory: directory)
        config.leadUp = true
        let seen = UtilityReports()
        try ConcurrencyWatchdog.enable(configuration: config) { seen.observe($0) }
        defer { ConcurrencyWatchdog.disable() }

        let blocked = await Task(priority: .low) { () -> TimedJob in
            let job = Self.spinJob(milliseconds: 0)
            usleep(400_000)
            return job
        }.value
        let ours = { (reports: [StallReport]) in
            reports.filter { $0.loop.threadId == blocked.thread && $0.task?.id == blocked.task }
        }
        await seen.settle { !ours($0).isEmpty }
        let report = try #require(ours(seen.all).first, "no report of task \(blocked.task)")
        let leadUp = try #require(report.leadUp, "the report has no lead-up")
        let inFlight = try #require(leadUp.inFlight, "no job in flight")
        #expect(inFlight.label == "task \(blocked.task)")
        #expect(inFlight.durationMs >= Double(Self.thresholdMs) - 4, "in flight for \(inFlight.durationMs) ms")
        #expect(leadUp.items.allSatisfy { $0.label?.hasPrefix("task ") ?? true }, "\(leadUp.items.map(\.label))")
    }
}
