// The stress tests of this module: each needs a test process of its own, so the suite skips them.
import Foundation
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
