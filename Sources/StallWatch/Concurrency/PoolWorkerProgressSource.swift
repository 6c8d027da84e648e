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

    /// The job the worker of `slot` runs now, for a report's `task` section, with the sequence number of that job;
    /// nil while the worker is idle. `previous` (the same job, seen before) is returned as is: the task's name is
    /// read once per job.
    static func task(
        ofSlot slot: Int32, previous: (sequence: UInt64, task: StallReport.TaskDescription)? = nil
    ) -> (sequence: UInt64, task: StallReport.TaskDescription)? {
        var view = sw_pool_slot_view()
        guard sw_pool_slot(slot, &view) == 0, view.busy != 0 else { return nil }
        if let previous, previous.sequence == view.sequence { return previous }
        var task = StallReport.TaskDescription(
            id: view.task_id, priority: Int(view.priority), queuedMs: StallReport.milliseconds(view.queued_ns))
        if view.named != 0 { task.name = name(ofSlot: slot) }
        return (view.sequence, task)
    }

    /// The name of the task running in `slot` (`Task(name:)`), or nil when it has none or it could not be read.
    static func name(ofSlot slot: Int32) -> String? {
        var buffer = [CChar](repeating: 0, count: 256)
        let length = buffer.withUnsafeMutableBufferPointer { sw_pool_task_name(slot, $0.baseAddress, 256) }
        guard length > 0 else { return nil }
        return String(decoding: buffer.prefix(Int(length)).map { UInt8(bitPattern: $0) }, as: UTF8.self)
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

    /// Two loads of the worker's slot: the job of the stall (its sequence is twice the job's number) still runs.
    func isStillStuck(after sequence: UInt64) -> Bool {
        var now = sw_pool_slot_view()
        return sw_pool_slot(slot, &now) == 0 && now.busy != 0 && now.sequence &* 2 == sequence
    }

    /// The job (the stall's sequence is twice its number) is the watchdog's to follow, unless its worker has
    /// already recorded it as a late job: then the worker's record is reported instead (``PoolLateJobs``).
    func claimStall(_ stall: StallDetector.Stall) -> Bool { sw_pool_follow(slot, stall.sequence / 2) != 0 }
}
