// PoolWorkerProgressSource: one Concurrency pool worker's job slot, read as a loop's progress.
import CStallWatchConcurrency

/// Progress of one pool worker, from its slot (lock-free loads): a job that starts moves the sequence and is a
/// busy phase (reported as `beforeSources`: the worker runs work); the end of the job moves it again and is an
/// idle phase. The pool watchdog waits for all workers at once, so ``wait(for:nextSampleAt:)`` is not used.
struct PoolWorkerProgressSource: ProgressSource {
    let slot: Int32
    private(set) var view = sw_pool_slot_view()

    init(slot: Int32) {
        self.slot = slot
        _ = sw_pool_slot(slot, &view)
    }

    /// The worker's thread; its stack bounds are found by the sampler.
    var sampledThread: SampledThread? {
        view.thread_id == 0 ? nil : SampledThread(threadID: view.thread_id, stackLow: 0, stackHigh: 0)
    }

    /// Two loads of the worker's slot: look again at once rather than sleep through the job's end.
    var looksAgainAtOnce: Bool { true }

    /// The job the worker of `slot` runs now, for a report's `task` section; nil while it is idle.
    static func task(ofSlot slot: Int32) -> StallReport.TaskDescription? {
        var view = sw_pool_slot_view()
        guard sw_pool_slot(slot, &view) == 0, view.busy != 0 else { return nil }
        return .init(
            id: view.task_id, priority: Int(view.priority), queuedMs: StallReportBuilder.millis(view.queued_ns))
    }

    mutating func read(now: UInt64) -> ProgressReading {
        guard sw_pool_slot(slot, &view) == 0 else {
            return .progress(LoopSnapshot(sequence: 0, activity: .beforeWaiting, phaseStartNanos: 0))
        }
        let busy = view.busy != 0
        // Moves at a job's start and at its end.
        let sequence = view.sequence &* 2 &+ (busy ? 0 : 1)
        return .progress(
            LoopSnapshot(
                sequence: sequence, activity: busy ? .beforeSources : .beforeWaiting, phaseStartNanos: view.start_ns),
            stallEndNanos: view.stall_end_ns)
    }

    func wait(for wait: StallDetector.Wait, nextSampleAt: UInt64?) -> Bool { true }

    func stallBegan() { sw_pool_follow(slot, 1) }
    func stallEnded() { sw_pool_follow(slot, 0) }
}
