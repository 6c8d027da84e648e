// PoolSaturationWatcher: one report when every pool worker is stuck in a job while other jobs wait.
import CStallWatchConcurrency
import CStallWatchCore

/// Watches the pool as a whole: when at least the pool's width of workers each run one job past the threshold
/// while jobs wait to start, the pool is saturated — one stall with cause `saturated` and a `pool` section
/// listing every busy worker's job and stack, followed until a worker finishes its job or nothing waits any more.
final class PoolSaturationWatcher: @unchecked Sendable {  // Used by the pool watchdog's thread only.
    private var follower: StallFollower<PoolSaturationSource>
    /// Judges which jobs are past the threshold (the detector's rule).
    private let detector: StallDetector.Configuration
    private let width: Int
    private let configuration: StallWatchConfiguration
    private let sampler: PoolWorkerStackSampling?

    init(configuration: StallWatchConfiguration, emit: @escaping @Sendable (StallEvent) -> Void) {
        detector = configuration.detectorConfiguration
        width = Int(sw_pool_width())
        self.configuration = configuration
        let target = StallRecorder.Target.concurrencyPool()
        sampler = target.sampler as? PoolWorkerStackSampling
        let recorder = StallRecorder(
            configuration: configuration, loopName: "concurrency-pool", target: target,
            emit: PoolCounters.counting(saturation: true, emit), quickSymbolicator: PoolWatcher.quickSymbolicator)
        follower = StallFollower(
            source: PoolSaturationSource(), recorder: recorder, configuration: configuration.detectorConfiguration,
            watcher: .poolWatchdog)
    }

    /// Looks at the pool now; returns when it wants to look again (nil: when a worker's deadline says).
    /// `symbolicator` (one the watchdog thread has warmed up) names the workers' frames at a saturation.
    func look(now: UInt64, symbolicator: @autoclosure () -> Symbolicator) -> UInt64? {
        var stuck: [sw_pool_slot_view] = []
        var slots: [Int32] = []
        for index in 0..<sw_pool_slot_count() {
            var view = sw_pool_slot_view()
            guard sw_pool_slot(index, &view) == 0, view.busy != 0, view.thread_id != 0 else { continue }
            if detector.isStall(busyNanos: sw_monotonic_coarse_ns() &- view.start_ns) {
                stuck.append(view)
                slots.append(index)
            }
        }
        var totals = sw_pool_totals()
        sw_pool_read_totals(&totals)
        let waiting = totals.jobs_enqueued > totals.jobs_started ? Int(totals.jobs_enqueued - totals.jobs_started) : 0
        let saturated = stuck.count >= width && waiting > 0
        follower.source.update(saturated: saturated, workers: stuck, now: now)
        if saturated, !follower.isFollowing {
            follower.recorder.nextPool = pool(stuck, slots: slots, waiting: waiting, symbolicator: symbolicator())
            follower.recorder.nextTask = nil
        }
        guard saturated || follower.isFollowing else { return nil }
        var looks = StallFollower<PoolSaturationSource>.Looks()
        guard looks.fold(follower.look(timedOut: false)) else { return nil }
        return looks.lookAgain ? now : looks.deadline
    }

    func stop() {
        follower.recorder.abandon(
            now: sw_monotonic_ns(), reason: "the pool watchdog stopped while the pool was saturated")
        follower.recorder.waitForLineFills()
    }

    /// The `pool` section: every stuck worker with its job, its task's name and its stack at detection.
    private func pool(
        _ workers: [sw_pool_slot_view], slots: [Int32], waiting: Int, symbolicator: Symbolicator
    ) -> StallReport.PoolDescription {
        let now = sw_monotonic_coarse_ns()
        let threads = workers.map(\.thread_id)
        let stacks =
            sampler?.workerStacks(threads, configuration: configuration, symbolicator: symbolicator)
            ?? threads.map { _ in ([], "in-process sampling is unavailable") }
        return .init(
            width: width, waitingJobs: waiting,
            workers: workers.indices.map { index in
                let view = workers[index]
                var task = StallReport.TaskDescription(
                    id: view.task_id, priority: Int(view.priority), queuedMs: StallReport.milliseconds(view.queued_ns))
                if view.named != 0 { task.name = PoolWorkerProgressSource.name(ofSlot: slots[index]) }
                return .init(
                    threadId: view.thread_id, task: task, runningMs: StallReport.milliseconds(now &- view.start_ns),
                    frames: stacks[index].frames, error: stacks[index].error)
            })
    }
}

/// The saturation as a loop's progress: busy from the moment the last of the stuck workers started its job,
/// idle once the pool is no longer saturated.
struct PoolSaturationSource: ProgressSource {
    /// The watcher updates the state between looks; the follower owns the source.
    final class State: @unchecked Sendable {  // Used by the pool watchdog's thread only.
        var sequence: UInt64 = 1
        var saturated = false
        var since: UInt64 = 0
        var endedAt: UInt64 = 0
        var firstWorker: Int32 = 0
    }
    let state = State()

    var sampledThread: SampledThread? {
        state.firstWorker == 0 ? nil : SampledThread(threadID: state.firstWorker, stackLow: 0, stackHigh: 0)
    }

    func update(saturated now: Bool, workers: [sw_pool_slot_view], now time: UInt64) {
        let state = self.state
        if now, !state.saturated {
            state.sequence &+= 1
            state.since = workers.map(\.start_ns).max() ?? 0
            state.firstWorker = workers.first?.thread_id ?? 0
        } else if !now, state.saturated {
            state.sequence &+= 1
            state.endedAt = time
        }
        state.saturated = now
    }

    func read(now: UInt64) -> ProgressReading {
        .progress(
            LoopSnapshot(
                sequence: state.sequence, activity: state.saturated ? .beforeSources : .beforeWaiting,
                phaseStartNanos: state.since),
            stallEndNanos: state.saturated ? 0 : state.endedAt)
    }

    func wait(for wait: StallDetector.Wait, nextSampleAt: UInt64?) -> Bool { true }
}
