// OffPoolTrait: runs each test of a suite on threads of its own, so that a test that blocks never holds one of the
// Swift Concurrency pool's few threads (two on a two-core machine) that every other test, the test runner and the
// product's own tasks need.
import Foundation
import Testing

/// Runs each test on an ``ElasticThreadExecutor`` instead of the Swift Concurrency pool.
///
/// Most of the suite's tests are synchronous and wait on purpose — for a child process, a report file, a stall to
/// end. Run on the cooperative pool, which has as many threads as the machine has cores, two such tests hold the
/// whole pool: a third test's awaits, the runner's time limits, and any task the product starts wait for them, and
/// on a loaded machine a test that takes a tenth of a second ran into its minutes-long time limit. Under this trait a
/// test's body (and its structured children) run on threads that exist for it, and the pool stays free.
///
/// How many tests run at once is set by the runner (`scripts/test.sh` sets
/// `SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH`, which queues a test before its time limit starts); the trait
/// also bounds it by itself (``OffPoolTrait/maximumRunning``) so that a bare `swift test` does not start every test
/// of the suite at once.
///
/// Suites whose subject is the cooperative pool itself (the Concurrency watchdog's) must not use it.
package struct OffPoolTrait: SuiteTrait, TestTrait, TestScoping {
    /// At most this many tests run under the trait at once, in this process.
    package static let maximumRunning = max(
        2, ProcessInfo.processInfo.environment["SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH"].flatMap(Int.init) ?? 2)

    private static let running = AsyncLimiter(width: maximumRunning)

    /// Set while a test runs under the trait, so that a nested suite that names it again takes no second place.
    @TaskLocal private static var isActive = false

    package var isRecursive: Bool { true }

    package func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        guard testCase != nil, !Self.isActive else { return try await function() }
        await Self.running.acquire()
        let executor = ElasticThreadExecutor(name: "test body")
        defer {
            executor.close()
            Self.running.release()
        }
        try await Self.$isActive.withValue(true) {
            try await withTaskExecutorPreference(executor) {
                try await function()
            }
        }
    }
}

extension Trait where Self == OffPoolTrait {
    /// Each test of the suite runs on threads of its own, off the Swift Concurrency pool: see ``OffPoolTrait``.
    package static var offPool: Self { OffPoolTrait() }
}
