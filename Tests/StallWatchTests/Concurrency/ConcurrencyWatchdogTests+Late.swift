// A pool job that crosses the threshold and returns while the pool watchdog is busy with another worker's stall.
import CStallWatchConcurrency
import CStallWatchCore
import Dispatch
import Foundation
import Glibc
import StallWatchTestSupport
import Synchronization
import Testing

@testable import StallWatch

/// The two jobs of the test: a long stall whose first report holds the watchdog's thread, and a short one that
/// starts and returns meanwhile.
final class BusyWatchdogJobs: Sendable {
    struct Job: Sendable {
        var thread: Int32 = 0
        var task: UInt64 = 0
        /// The job's number on its worker (its slot's sequence while it runs).
        var number: UInt64 = 0
        var blockedMs: Double = 0
    }

    let long = Mutex(Job())
    let short = Mutex(Job())
    let releaseLong = DispatchSemaphore(value: 0)
    let shortReturned = DispatchSemaphore(value: 0)
    let held = Atomic<Bool>(false)

    static func here() -> Job {
        var job = Job(thread: sw_gettid(), task: ConcurrencyWatchdog.currentTaskID ?? 0)
        var view = sw_pool_slot_view()
        for index in 0..<sw_pool_slot_count() where sw_pool_slot(index, &view) == 0 && view.thread_id == job.thread {
            job.number = view.sequence
        }
        return job
    }

    /// Blocks the worker until the short job has come and gone.
    @inline(never)
    func blockUntilReleased() {
        long.withLock { $0 = Self.here() }
        _ = releaseLong.wait(timeout: .now() + .seconds(30))
    }

    @inline(never)
    func blockBriefly(milliseconds: Int) {
        let job = Self.here()
        let start = ContinuousClock.now
        usleep(UInt32(milliseconds * 1000))
        let elapsed = ContinuousClock.now - start
        short.withLock {
            $0 = job
            $0.blockedMs = Double(elapsed.components.seconds) * 1e3 + Double(elapsed.components.attoseconds) / 1e15
        }
        shortReturned.signal()
    }

    /// True once the short job's worker no longer runs it (it has returned from the job, and recorded it).
    var shortJobReturned: Bool {
        let job = short.withLock { $0 }
        var view = sw_pool_slot_view()
        for index in 0..<sw_pool_slot_count() where sw_pool_slot(index, &view) == 0 && view.thread_id == job.thread {
            return view.busy == 0 || view.sequence != job.number
        }
        return false
    }

    /// Called on the pool watchdog's thread for every event: at the long stall's first report, holds that thread
    /// until the short job has started, crossed the threshold and returned.
    func observe(_ event: StallEvent, shortMs: Int) {
        guard case .began(let report) = event, report.loop.threadId == long.withLock({ $0.thread }),
            !held.exchange(true, ordering: .relaxed)
        else { return }
        Task.detached(name: "late-short", priority: .utility) { self.blockBriefly(milliseconds: shortMs) }
        if shortReturned.wait(timeout: .now() + .seconds(30)) == .success {
            let deadline = ContinuousClock.now + .seconds(30)
            while !shortJobReturned, ContinuousClock.now < deadline { usleep(1000) }
        }
        releaseLong.signal()
    }
}

extension ConcurrencyWatchdogTests {
    /// The watchdog's thread is held inside the long stall's first report (its event callback runs there) while the
    /// short job runs from start to return: no look ever sees it. Its worker records it when it returns, and the
    /// watchdog reports it late: one report, the job's exact duration, no samples, and a cause saying why.
    @Test(.timeLimit(.minutes(3)))
    func aShortStallWhileTheWatchdogIsBusyWithAnotherWorkerIsOneLateReportWithTheExactDuration() async throws {
        let directory = Fixtures.temporaryDirectory("pool-late")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let seen = UtilityReports()
        let jobs = BusyWatchdogJobs()
        let unsampledBefore = PoolCounters.unsampledJobs.load(ordering: .relaxed)
        try ConcurrencyWatchdog.enable(configuration: configuration(directory: directory)) { event in
            seen.observe(event)
            jobs.observe(event, shortMs: Self.blockMs)
        }
        defer { ConcurrencyWatchdog.disable() }

        let long = Task.detached(name: "late-long", priority: .medium) { jobs.blockUntilReleased() }
        await long.value
        let short = { (reports: [StallReport]) in
            let job = jobs.short.withLock { $0 }
            return reports.filter { $0.loop.threadId == job.thread && $0.task?.id == job.task && job.task != 0 }
        }
        // Both reports: the late one, and the long stall's final report (its `ended` event comes from the report
        // queue, after the late one may have).
        let longJob = { (reports: [StallReport]) in
            let thread = jobs.long.withLock { $0.thread }
            return reports.filter { $0.loop.threadId == thread && $0.task?.name == "late-long" }
        }
        await seen.settle { !short($0).isEmpty && !longJob($0).isEmpty }
        let held = jobs.held.load(ordering: .relaxed)
        #expect(held, "the long stall was never reported")
        let job = jobs.short.withLock { $0 }
        let reports = short(seen.all)
        try #require(reports.count == 1, "\(reports.map(\.id)) for \(job)")
        let report = reports[0]
        #expect(report.status == .ended)
        #expect(report.detection.source == "concurrency-pool")
        #expect(report.samples.isEmpty && report.capture.samplesTaken == 0)
        #expect(report.cause?.kind == .unknown)
        #expect(report.cause?.evidence.first?.hasPrefix("not sampled") == true, "\(String(describing: report.cause))")
        // The worker's own timing: from the job's start (a coarse clock, up to 4 ms early) to its return, which
        // encloses the blocking call; a loaded machine may preempt the job around the call.
        #expect(report.durationMs >= job.blockedMs - 0.1, "\(report.durationMs) vs \(job.blockedMs)")
        #expect(report.durationMs <= job.blockedMs + 100, "\(report.durationMs) vs \(job.blockedMs)")
        let task = try #require(report.task)
        #expect(task.priorityName == "low")
        // No look saw the job run, so its task's name was never read; the report says so.
        #expect(task.name == nil)
        #expect(report.notes.contains { $0.contains("has a name, but it was not read") }, "\(report.notes)")
        let unsampled = PoolCounters.unsampledJobs.load(ordering: .relaxed)
        #expect(unsampled > unsampledBefore)
        // The long stall itself was followed and sampled as usual.
        let longReports = longJob(seen.all)
        #expect(
            longReports.count == 1 && longReports.allSatisfy { !$0.samples.isEmpty },
            "\(longReports.map { ($0.id, $0.status, $0.durationMs, $0.samples.count, $0.notes) })")
        try Fixtures.expectReportsValidate(in: directory)
    }
}
