// The demo's stalls on the Swift Concurrency pool: a blocking call inside an async function, or every worker at once.
import Dispatch
import Foundation
import StallWatch
import Synchronization

/// Async functions that block the pool worker running them, each through the loop demo's named stall.
enum PoolStalls {
    /// Runs `kind` inside an async function on the pool; `saturate` blocks every worker and queues one more job.
    static func start(_ kind: StallKind, durationMs: Int) {
        guard kind == .saturate else {
            Task.detached(name: "demo-\(kind.rawValue)", priority: .medium) {
                await blockingHandler(kind, durationMs: durationMs)
            }
            return
        }
        let workers = ProcessInfo.processInfo.activeProcessorCount
        let everyWorker = Rendezvous(count: workers)
        for index in 0..<workers {
            Task.detached(name: "demo-saturate-\(index)", priority: .medium) {
                everyWorker.arriveAndWait(atMostNanos: 5_000_000_000)
                blockingWork(.sleep, durationMs: durationMs)
            }
        }
        // Queued behind them at the same priority: a job that has to wait for a worker.
        Task.detached(name: "demo-waiting", priority: .medium) { await Task.yield() }
    }

    /// Blocking work called from an async context without awaiting anything first.
    @inline(never)
    static func blockingWork(_ kind: StallKind, durationMs: Int) {
        Stalls.run(kind, durationMs: durationMs)
    }

    /// A request handler that blocks instead of awaiting: what starves the pool.
    @inline(never)
    static func blockingHandler(_ kind: StallKind, durationMs: Int) async {
        await Task.yield()
        Stalls.run(kind, durationMs: durationMs)
    }
}

/// A blocking meeting point for `count` threads: each waits until all have arrived, so that all of them block at
/// once. The pool may start its last thread only a while after the jobs are queued (seen: 750 ms), and the jobs
/// would then block one after the other instead of together.
final class Rendezvous: Sendable {
    private let arrived = Atomic<Int>(0)
    let count: Int

    init(count: Int) { self.count = count }

    @inline(never)
    func arriveAndWait(atMostNanos limit: UInt64) {
        arrived.add(1, ordering: .acquiringAndReleasing)
        let deadline = DispatchTime.now().uptimeNanoseconds + limit
        while arrived.load(ordering: .acquiring) < count, DispatchTime.now().uptimeNanoseconds < deadline {
            usleep(1000)
        }
    }
}

extension StallCommand {
    /// `--loop concurrency`: the pool watchdog embedded, one stall (or saturation) inside async code; exits 0 once
    /// its final report is out.
    func runOnConcurrencyPool() -> Never {
        if kind == .hungAwait {
            HungAwaits.run(
                configuration: configuration, durationMs: durationMs, cycling: cyclingTasks,
                resumeAfterMs: resumeAfterMs)
        }
        let done = DispatchSemaphore(value: 0)
        let kind = kind
        do {
            try ConcurrencyWatchdog.enable(configuration: configuration) { event in
                EventPrinter.print(event)
                guard case .ended(let report) = event else { return }
                guard kind != .saturate || report.cause?.kind == .saturated else { return }
                if kind != .saturate { Stalls.printRunQueueWaitSinceLastStall() }
                done.signal()
            }
        } catch {
            fail(error.message, code: 1)
        }
        let durationMs = durationMs
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(delayMs)) {
            PoolStalls.start(kind, durationMs: durationMs)
        }
        let outcome = done.wait(timeout: .now() + .milliseconds(delayMs + durationMs) + .seconds(30))
        // Let the other workers' reports of a saturation finish before stopping.
        if kind == .saturate { Thread.sleep(forTimeInterval: Double(durationMs) / 1000) }
        ConcurrencyWatchdog.disable()
        if outcome == .timedOut { fail("timed out waiting for the pool's report", code: 1) }
        exit(0)
    }
}
