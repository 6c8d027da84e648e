import CStallWatchConcurrency
// The pool watchdog in this process: each way of blocking a pool worker is one report, with the task named.
import Dispatch
import Foundation
import StallWatchTestSupport
import Synchronization
import Testing

@testable import StallWatch

@Suite(.serialized) struct ConcurrencyWatchdogTests {
    static let thresholdMs = 100
    static let sampleIntervalMs = 20
    static let blockMs = 300

    func configuration(directory: String) -> StallWatchConfiguration {
        var config = StallWatchConfiguration()
        config.thresholdMs = Self.thresholdMs
        config.sampleIntervalMs = Self.sampleIntervalMs
        config.reportDirectory = directory
        config.dedupWindowMs = 0
        config.heartbeat = false
        config.maxThreads = 0
        // Names without DWARF line tables: loading those of this large debug test binary takes seconds on a busy
        // machine, on the one thread that also detects the next stall.
        config.symbolication = .fast
        return config
    }

    /// Final reports of the pool watchdog, as they arrive.
    final class UtilityReports: Sendable {
        let reports = Mutex<[StallReport]>([])

        func observe(_ event: StallEvent) {
            guard case .ended(let report) = event else { return }
            reports.withLock { $0.append(report) }
        }

        var all: [StallReport] { reports.withLock { $0 } }

        /// Waits without blocking a pool worker (the test runs on the pool too) until `enough` holds, at most 20 s,
        /// then a further 300 ms for a report that should not come.
        func settle(until enough: ([StallReport]) -> Bool) async {
            let deadline = ContinuousClock.now + .seconds(20)
            while !enough(all), ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(10)) }
            try? await Task.sleep(for: .milliseconds(300))
        }
    }

    /// Each shape once: one report, the task named, the job's exact duration. (Reports used to go missing now and
    /// then: a job that started while the watchdog was looking at the workers, before it read the pool's job count,
    /// was counted as seen, and the watchdog parked through its whole stall; and beside the other suites, whose
    /// tests are pool jobs that block for seconds, the one watchdog thread could be busy sampling those for the
    /// whole 300 ms job, which then went unreported. Such a job is now reported late, from its worker's own record.)
    ///
    /// In the shared test process a report may therefore be that late one, without samples: the samples' checks
    /// (the blocking function, the async frames, the cause) apply to a sampled report, and alone (the same check in
    /// ``StressTests``, which `scripts/test.sh` runs in a process of its own after the suite) the report must be
    /// sampled: nothing else keeps the watchdog busy there.
    @Test(.timeLimit(.minutes(3)), arguments: PoolBlockingShapes.Shape.allCases)
    func blockedWorkerIsOneReportNamingTheTaskWithTheJobsDuration(shape: PoolBlockingShapes.Shape) async throws {
        try await checkBlockedWorker(shape: shape, alone: false)
    }

    /// One blocked worker of `shape`, its report checked; `alone`: in a test process of its own, where the report
    /// must be sampled.
    func checkBlockedWorker(shape: PoolBlockingShapes.Shape, alone: Bool) async throws {
        let directory = Fixtures.temporaryDirectory("pool-\(shape.rawValue)")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let seen = UtilityReports()
        try ConcurrencyWatchdog.enable(configuration: configuration(directory: directory)) { seen.observe($0) }
        defer { ConcurrencyWatchdog.disable() }

        let begun = Date()
        await PoolBlockingShapes.run(shape, milliseconds: Self.blockMs)
        let finished = Date()
        // Read at once: the thread's wait for a CPU since the blocking function began (it runs past the job's end
        // into whatever the worker ran next, which only widens the allowance by time it really waited).
        let runQueueMs = PoolBlockingShapes.runQueueMsSinceStart()
        let tid = PoolBlockingShapes.blockedThread.withLock { $0 }
        let taskID = PoolBlockingShapes.blockedTask.withLock { $0 }
        // Other suites block pool workers too: ours is the stall of our thread that began while the shape ran.
        let ours = { (reports: [StallReport]) in
            reports.filter {
                $0.loop.threadId == tid && $0.task?.id == taskID && $0.pool == nil
                    && $0.startedAt >= begun.addingTimeInterval(-0.01)
                    && $0.startedAt <= finished
            }
        }
        await seen.settle { !ours($0).isEmpty }
        let reports = ours(seen.all)
        let all = seen.all.map { ($0.loop.threadId, $0.task?.id, $0.startedAt, $0.durationMs) }
        try #require(
            reports.count == 1,
            "\(shape): \(reports.map(\.id)) of \(all) for \(tid), task \(taskID), \(begun)…\(finished)")
        let report = reports[0]
        #expect(report.detection.source == "concurrency-pool")
        #expect(report.status == .ended)
        #expect(report.loop.threadId != 0)
        let task = try #require(report.task)
        #expect(task.id != 0 && task.id == taskID)
        // The job's priority: the task's own (`low`) when it starts, the resumer's when it is resumed.
        #expect(["low", "medium"].contains(task.priorityName))
        let blocked = PoolBlockingShapes.blockedMs.withLock { $0 }
        // The job's duration: the blocking call and whatever the job did around it (alone, within 5 ms of the
        // call; a loaded machine may preempt the job before or after it: the thread's own run-queue wait).
        #expect(report.durationMs >= blocked - Double(Self.sampleIntervalMs), "\(report.durationMs) vs \(blocked)")
        #expect(
            report.durationMs <= blocked + 100 + runQueueMs,
            "\(report.durationMs) vs \(blocked), \(runQueueMs) ms of it waiting for a CPU")
        guard !report.samples.isEmpty else {
            // Reported late: the job returned before the busy watchdog looked at it.
            #expect(!alone, "\(shape): not sampled in a process of its own: \(String(describing: report.cause))")
            #expect(report.cause?.evidence.first?.hasPrefix("not sampled") == true)
            #expect(task.name == PoolBlockingShapes.taskName(shape) || task.name == nil)
            return
        }
        #expect(task.name == PoolBlockingShapes.taskName(shape))
        // Alone this is ≤ 10 ms (the acceptance bar); with the whole suite blocking the pool, the watchdog may
        // be busy writing another stall's report when ours crosses the threshold.
        #expect(report.detection.latencyMs <= 500, "\(shape): detected \(report.detection.latencyMs) ms late")
        // A sleeping worker is `sleep`, unless a loaded machine shows it in D state.
        // A spinning worker that other processes keep off the CPU for most of the stall is `starved`, with the run
        // queue as its evidence.
        let expected: [StallReport.Cause.Kind] = shape == .cpu ? [.cpu] : [.sleep, .io]
        #expect(
            report.cause.map { cause in expected.contains { cause.matches($0) } } == true,
            "\(shape): \(String(describing: report.cause))")
        // Sampled without interrupting the worker: the blocking function, and the async frames awaiting above it.
        #expect(report.capture.method == ThreadCaptureHelper.captureMethod)
        let function = PoolBlockingShapes.blockingFunction(shape)
        let named = report.samples.filter { $0.frames.contains { $0.symbol?.contains(function) == true } }
        #expect(!named.isEmpty, "\(shape): no sample names \(function)")
        #expect(
            report.samples.contains { sample in sample.frames.contains { $0.kind == .async && $0.symbol != nil } },
            """
            \(shape): no async frame in \(report.samples.count) samples (offset ms: frames, async frames; \
            errors \(report.capture.errors), notes \(report.notes)): \
            \(report.samples.map { "\(Int($0.offsetMs)): \($0.frames.count), \($0.frames.filter { $0.kind == .async }.count)" }); \
            the last: \(report.samples.last.map { $0.frames.map { $0.symbol ?? "?" } } ?? [])
            """)
        #expect(report.samples.allSatisfy { $0.frames.count < 2 || Self.asyncFramesFollowTheJob($0.frames) })
        try Fixtures.expectReportsValidate(in: directory)
    }

    /// Async frames sit between the job's partial function and the runtime's `swift_job_run`, never below it.
    static func asyncFramesFollowTheJob(_ frames: [StackFrame]) -> Bool {
        guard let first = frames.firstIndex(where: { $0.kind == .async }) else { return true }
        let last = frames.lastIndex { $0.kind == .async }!
        let run = frames.firstIndex { $0.symbol == "swift_job_run" }
        return first > 0 && frames[first...last].allSatisfy { $0.kind == .async } && (run.map { $0 > last } ?? true)
    }

    @Test(.timeLimit(.minutes(3)))
    func aPoolWithEveryWorkerStuckWhileJobsWaitIsOneSaturatedReportListingEachWorker() async throws {
        let directory = Fixtures.temporaryDirectory("pool-saturated")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let seen = UtilityReports()
        try ConcurrencyWatchdog.enable(configuration: configuration(directory: directory)) { seen.observe($0) }
        defer { ConcurrencyWatchdog.disable() }
        let width = ProcessInfo.processInfo.activeProcessorCount

        let begun = Date()
        let blocked = (0..<width).map { _ in
            Task.detached(priority: .utility) { PoolBlockingShapes.blockInUsleep(milliseconds: 600) }
        }
        // Queued behind them at the same priority: the job that waits.
        let waiting = Task.detached(priority: .utility) { 1 }
        for task in blocked { await task.value }
        #expect(await waiting.value == 1)

        let ours = { (reports: [StallReport]) in
            reports.filter {
                $0.pool?.workers.contains { $0.task.priorityName == "low" } == true
                    && $0.startedAt >= begun.addingTimeInterval(-0.01)
            }
        }
        await seen.settle { !ours($0).isEmpty }
        let saturated = ours(seen.all)
        try #require(saturated.count == 1, "\(saturated.map(\.id))")
        let pool = try #require(saturated[0].pool)
        #expect(saturated[0].cause?.kind == .saturated)
        // Every stuck worker is listed: ours (`low`) and any other suite's job stuck on the pool meanwhile.
        // The pool counts as saturated once `width` workers are stuck; under the whole suite one of them may be
        // another suite's job, so at least one is ours and every listed worker is a distinct thread.
        let mine = pool.workers.filter { $0.task.priorityName == "low" }
        #expect(!mine.isEmpty)
        #expect(pool.workers.count >= width)
        #expect(Set(pool.workers.map(\.threadId)).count == pool.workers.count)
        #expect(mine.allSatisfy { $0.runningMs >= Double(Self.thresholdMs) })
        // Each of our workers with its stack, down to the blocking function.
        for worker in mine {
            #expect(worker.frames.contains { $0.symbol?.contains("blockInUsleep") == true }, "\(worker)")
        }
    }

    @Test(.timeLimit(.minutes(3)))
    func poolStatisticsCountJobsAndTheirDurations() async throws {
        let directory = Fixtures.temporaryDirectory("pool-stats")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try ConcurrencyWatchdog.enable(configuration: configuration(directory: directory))
        defer { ConcurrencyWatchdog.disable() }
        let before = ConcurrencyWatchdog.statistics
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<1000 { group.addTask {} }
        }
        #expect(ConcurrencyWatchdog.statistics.jobsStarted - before.jobsStarted >= 1000)
        // A job's duration is counted when its job returns, after it completed its task: the group's last child
        // may resume this one first. Waited for (awaiting, not blocking a pool thread), for at most 10 s.
        let counted = {
            ConcurrencyWatchdog.statistics.durationCounts.reduce(0, +) - before.durationCounts.reduce(0, +)
        }
        for _ in 0..<10_000 where counted() < 1000 { try await Task.sleep(for: .milliseconds(1)) }
        let after = ConcurrencyWatchdog.statistics
        #expect(after.durationCounts.reduce(0, +) - before.durationCounts.reduce(0, +) >= 1000)
        #expect(after.delayCounts.count == PoolStatistics.bucketBounds.count + 1)
    }
}

// Enabling and disabling, in the same serialized suite: the pool watchdog is one per process.
extension ConcurrencyWatchdogTests {
    static func poolThreads() -> Int {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        return tasks.filter { tid in
            (try? String(contentsOfFile: "/proc/self/task/\(tid)/comm", encoding: .utf8))?.hasPrefix("stallwatch-pool")
                == true
        }.count
    }

    /// ``poolThreads()`` once it reads `expected`, or after 5 s. A thread that `disable()` joined stays listed in
    /// /proc/self/task until the kernel reaps it, which a loaded machine can delay past the next `enable()`; a
    /// thread that never exits is still counted after 5 s.
    static func poolThreads(settlingAt expected: Int) async -> Int {
        var count = poolThreads()
        for _ in 0..<5000 where count != expected {
            try? await Task.sleep(for: .milliseconds(1))
            count = poolThreads()
        }
        return count
    }

    /// This process's open descriptors, each as its number and what it refers to (the listing's own descriptor,
    /// closed by the time it is read, is left out).
    static func openDescriptors() -> Set<String> {
        let numbers = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return Set(
            numbers.compactMap { fd in
                (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(fd)")).map {
                    "\(fd) → \($0)"
                }
            })
    }

    /// Runs in a process of its own (an exit test): no other suite opens descriptors or starts threads there, so
    /// every count is exact. A cycle is two hand-offs between threads: alone 1,000 take about a second, on a
    /// machine loaded with other builds minutes.
    @Test(.timeLimit(.minutes(8)))
    func enablingAndDisabling1000TimesLeavesNoThreadNoHookAndNoDescriptor() async {
        let result = await #expect(processExitsWith: .success, observing: [\.standardOutputContent]) {
            print(await ConcurrencyWatchdogTests.leftAfterEnablingAndDisabling(cycles: 1000), terminator: "")
        }
        // What the child found left behind; empty when nothing was.
        #expect(result.map { String(decoding: $0.standardOutputContent, as: UTF8.self) } == "")
    }

    /// Enables and disables the pool watchdog `cycles` times (running jobs now and then); returns what is left
    /// behind (threads, the hook, descriptors), one line each, or an empty string.
    static func leftAfterEnablingAndDisabling(cycles: Int) async -> String {
        let directory = Fixtures.temporaryDirectory("pool-cycles")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var config = StallWatchConfiguration()
        config.reportDirectory = directory
        config.heartbeat = false
        config.maxThreads = 0
        // No stall of a busy machine's slow job: its report would open image files for symbols meanwhile.
        config.thresholdMs = 60_000
        let jobs = {
            await withTaskGroup(of: Void.self) { group in
                for _ in 0..<10 { group.addTask {} }
            }
        }
        var halfway = Set<String>()
        // Swift Testing takes a backtrace of every error thrown in the process (its `swift_willThrow` hook) with
        // libunwind's local library, which opens its memory-validation pipe pair the first time it runs: once per
        // process, at the first error thrown anywhere (a `try?` that fails, a cancelled sleep), not StallWatch's.
        // One error thrown now opens it before the counts; StallWatch's own (the capture helper's wake-up pipe,
        // the remote unwinder library's validation pipe) are opened by the first cycles below.
        try? Self.throwOnce()
        do {
            // The first cycles set up what lives as long as the process: the routing queues, the capture helper
            // and its wake-up pipe, libdispatch's workers.
            for _ in 0..<10 {
                try ConcurrencyWatchdog.enable(configuration: config)
                await jobs()
                ConcurrencyWatchdog.disable()
            }
            // Half the cycles, then the other half: what is created once and kept (the image files the
            // process-wide symbolicator and the unwinders read) is there at the halfway count; what a cycle leaks
            // grows between the counts.
            for cycle in 0..<cycles {
                if cycle == cycles / 2 { halfway = openDescriptors() }
                try ConcurrencyWatchdog.enable(configuration: config)
                if cycle % 100 == 0 {
                    await jobs()
                    let threads = await poolThreads(settlingAt: 1)
                    if threads != 1 || !ConcurrencyWatchdog.hookInstalled {
                        return "cycle \(cycle) did not enable: \(threads) stallwatch-pool threads, hook installed: "
                            + "\(ConcurrencyWatchdog.hookInstalled)\n"
                    }
                }
                ConcurrencyWatchdog.disable()
            }
            let descriptors = halfway
            var left = ""
            let threads = await poolThreads(settlingAt: 0)
            if threads != 0 || ConcurrencyWatchdog.isEnabled {
                left += "\(threads) stallwatch-pool threads, enabled: \(ConcurrencyWatchdog.isEnabled)\n"
            }
            if ConcurrencyWatchdog.hookInstalled { left += "the global enqueue hook\n" }
            let after = openDescriptors()
            if after != descriptors {
                left += "descriptors opened: \(after.subtracting(descriptors).sorted()), "
                left += "closed: \(descriptors.subtracting(after).sorted())\n"
            }
            return left
        } catch {
            return "enable failed: \(error)\n"
        }
    }

    @inline(never)
    static func throwOnce() throws { throw CancellationError() }

    @Test func anUnknownRuntimeLayoutIsNotOneStallWatchKnows() {
        #expect(ConcurrencyWatchdog.knownLayoutVersions.contains(Int(sw_pool_runtime_layout_version())))
        #expect(!ConcurrencyWatchdog.knownLayoutVersions.contains(-1))
    }
}
