// The stress tests of this module: each needs a test process of its own, so the suite skips them.
import Foundation
import StallWatchTestSupport
import Testing

@testable import StallWatch

/// Tests that load the whole test process (a thousand threads to create and snapshot) or that must have it to
/// themselves (the pool watchdog with no other test's jobs to follow). Bounded, but they neither disturb nor may be
/// disturbed by the suites running in parallel: `scripts/test.sh` runs them after the suite, in a test process of
/// their own, by this suite's name (`STALLWATCH_STRESS=1 swift test --skip-build --filter '\.StressTests/'`), and
/// fails when that selection runs no test or skips one. Every test nested here is a stress test.
@Suite(
    .serialized, .tags(.slow),
    .enabled(if: StressRun.selected, "runs alone: STALLWATCH_STRESS=1 swift test --filter '\\.StressTests/'"))
enum StressTests {}

/// Whether this test process runs the stress tests (`STALLWATCH_STRESS=1`).
enum StressRun {
    static var selected: Bool { StallWatchEnvironmentVariable.stress.value == "1" }
}

extension StressTests {
    /// The pool's per-shape test again, alone: there every report must be sampled, with the blocking function, the
    /// async frames and the cause, since no other test keeps the pool watchdog busy.
    @Suite(.serialized) struct PoolShapesAlone {
        @Test(.timeLimit(.minutes(3)), arguments: PoolBlockingShapes.Shape.allCases)
        func blockedWorkerAloneIsSampledWithTheTaskAndTheJobsDuration(shape: PoolBlockingShapes.Shape) async throws {
            try await ConcurrencyWatchdogTests().checkBlockedWorker(shape: shape, alone: true)
        }
    }
}

extension StressTests {
    /// The pool watchdog with the task table: while every worker idles and a suspended task's hung-await threshold
    /// is seconds away, a job that starts must end the watchdog's wait. (It slept until that threshold, and a worker
    /// that blocked meanwhile was found only when its job returned: reported late, without a sample.)
    @Suite(.serialized) struct PoolWithASuspendedTaskAlone {
        @Test(.timeLimit(.minutes(2)))
        func aWorkerBlockedWhileASuspendedTaskWaitsIsSampledFromItsThreshold() async throws {
            let directory = Fixtures.temporaryDirectory("pool-suspended-task")
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let tests = ConcurrencyWatchdogTests()
            var config = tests.tableConfiguration(directory: directory, maxTasks: 1024)
            config.hungAwaitThresholdMs = 10_000
            let seen = ConcurrencyWatchdogTests.UtilityReports()
            try ConcurrencyWatchdog.enable(configuration: config) { seen.observe($0) }
            defer { ConcurrencyWatchdog.disable() }
            let waiting = SuspendedTasks(count: 1)
            defer { waiting.resumeAll() }
            #expect(await ConcurrencyWatchdogTests.settle { waiting.allWaiting })
            // The pool idles past the watchdog's grace (one threshold): it waits for the suspended task's threshold.
            try await Task.sleep(for: .milliseconds(500))

            let begun = Date()
            await PoolBlockingShapes.run(.usleep, milliseconds: 600)
            let finished = Date()
            let tid = PoolBlockingShapes.blockedThread.withLock { $0 }
            let ours = { (reports: [StallReport]) in
                reports.filter {
                    $0.loop.threadId == tid && $0.startedAt >= begun.addingTimeInterval(-0.01)
                        && $0.startedAt <= finished
                }
            }
            await seen.settle { !ours($0).isEmpty }
            let reports = ours(seen.all)
            try #require(reports.count == 1, "\(reports.map { "\($0.durationMs) ms \($0.notes)" })")
            let report = reports[0]
            #expect(
                !report.samples.isEmpty,
                "found at the job's end: \(report.cause?.evidence ?? []), detected \(report.detection.latencyMs) ms late"
            )
            #expect(report.detection.latencyMs <= 100, "detected \(report.detection.latencyMs) ms late")
        }
    }
}

extension StressTests {
    /// Leak checks with no margin: alone in their process, nothing else starts threads or opens descriptors, so the
    /// counts must come back exactly.
    @Suite(.serialized) struct LeaksAlone {
        @Test(.timeLimit(.minutes(2)))
        func startingAndStoppingAThousandTimesLeavesNoThreadOrDescriptorBehind() throws {
            try WatchdogTests().checkStartingAndStoppingAThousandTimesLeavesNothingBehind()
        }

        @Test(.timeLimit(.minutes(3)))
        func aThousandStartsAndStopsWithSystemdPingsAndAMetricsServerLeaveNoThreadsOrDescriptors() throws {
            try EmbeddingLifecycleTests()
                .checkAThousandStartsAndStopsWithSystemdPingsAndAMetricsServerLeaveNoThreadsOrDescriptors()
        }
    }
}

extension Tag {
    /// Stress tests: bounded, but longer or heavier than the rest.
    @Tag static var slow: Self
}
