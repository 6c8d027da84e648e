// PoolWatcher: the pool watchdog's thread body: one stall follower per worker slot, one wait for all of them.
import CStallWatchConcurrency
import CStallWatchCore

#if canImport(Glibc)
    import Glibc
#endif

/// Follows the stalls of every Concurrency pool worker from one thread.
///
/// Each worker slot has its own ``StallFollower`` (and recorder) over a ``PoolWorkerProgressSource``; after a
/// look at all of them the thread sleeps until the earliest deadline any of them gave (a job's start plus the
/// threshold, or a sample). When every worker is idle it sleeps one threshold, and parks for good if no job
/// started meanwhile: an idle pool costs no wake-ups, and a busy one about one per threshold.
final class PoolWatcher: @unchecked Sendable {  // Runs on the pool watchdog's thread only, after hand-off.
    private let configuration: StallWatchConfiguration
    private let emit: @Sendable (StallEvent) -> Void
    private let isStopping: @Sendable () -> Bool
    private var followers: [StallFollower<PoolWorkerProgressSource>] = []
    private let saturation: PoolSaturationWatcher

    init(
        configuration: StallWatchConfiguration, emit: @escaping @Sendable (StallEvent) -> Void,
        isStopping: @escaping @Sendable () -> Bool
    ) {
        self.configuration = configuration
        self.emit = emit
        self.isStopping = isStopping
        saturation = PoolSaturationWatcher(configuration: configuration, emit: emit)
    }

    /// Follows the workers until stopped; `ready` is called once the recorders are set up, before the first look.
    func run(ready: () -> Void = {}) {
        let threshold = UInt64(configuration.thresholdMs) * 1_000_000
        // Recorders for the workers to come are set up now, not when their first job is already stuck.
        addFollowers(atLeast: Int(sw_pool_width()) + 2)
        followers.first?.recorder.warmUp()
        ready()
        while !isStopping() {
            addFollowers()
            // The saturation first: its end is seen by this look, not after the workers' final reports.
            var deadline = saturation.look(now: sw_monotonic_ns())
            var lookAgain = false
            for index in followers.indices {
                followers[index].recorder.nextTask = PoolWorkerProgressSource.task(ofSlot: Int32(index))
                // Never "timed out" for the late-wake-up guard: one thread serves every worker, so waking late for
                // one worker is usually this thread writing another's report, not the process going unscheduled
                // (the worker measures its job's duration itself either way; the suspend guard still applies).
                switch followers[index].look(timedOut: false) {
                case .lookAgain: lookAgain = true
                case .sourceEnded: break
                case .wait(let wait, let nextSampleAt):
                    if case .until(let t) = wait { deadline = min(deadline ?? t, t) }
                    if let next = nextSampleAt { deadline = min(deadline ?? next, next) }
                }
            }
            if lookAgain { continue }
            if let deadline {
                _ = sw_pool_sleep_until(deadline)
                continue
            }
            // Every worker idle: one threshold of grace, then park until a job starts.
            var totals = sw_pool_totals()
            sw_pool_read_totals(&totals)
            if sw_pool_sleep_until(sw_monotonic_ns() + threshold) == 1, !isStopping() {
                _ = sw_pool_park(totals.jobs_started)
            }
        }
        for index in followers.indices {
            followers[index].recorder.abandon(
                now: sw_monotonic_ns(), reason: "the pool watchdog stopped while the job was still running")
            followers[index].source.stallEnded()
        }
        saturation.stop()
    }

    private func addFollowers(atLeast minimum: Int = 0) {
        let count = max(minimum, Int(sw_pool_slot_count()))
        while followers.count < count {
            let recorder = StallRecorder(
                configuration: configuration, loopName: "concurrency-pool", target: .concurrencyPool(),
                emit: PoolCounters.counting(saturation: false, emit))
            followers.append(
                StallFollower(
                    source: PoolWorkerProgressSource(slot: Int32(followers.count)), recorder: recorder,
                    configuration: configuration.detectorConfiguration, watcherName: "pool watchdog"))
        }
    }
}

extension StallRecorder.Target {
    /// This process's Concurrency pool workers: signal sampling where a worker can answer, a capture error where
    /// it blocks signals.
    static func concurrencyPool() -> Self {
        var target = Self.inProcess()
        let signal = (try? SignalSampler.shared())?.signal ?? 0
        target.sampler = PoolWorkerStackSampling(inner: target.sampler as? SignalStackSampling, signal: signal)
        target.detectionSource = "concurrency-pool"
        return target
    }
}
