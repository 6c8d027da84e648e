// PoolLateJobs: reports the slow jobs the pool watchdog never looked at, from their workers' own records.
import CStallWatchConcurrency
import CStallWatchCore

/// The pool watchdog's one thread follows one worker's stall at a time between looks: while it samples or writes
/// the report of a long stall, another worker's job can cross the threshold and return before the next look. Such a
/// job's worker records it when the job returns (start, precise end, task, priority; `sw_pool_take_late`) and wakes
/// the watchdog, which reports it here: one final report per job, the exact duration, no samples, and a cause saying
/// why it was not sampled. A compare-and-swap per slow job (`sw_pool_follow`) decides whether the watchdog follows
/// the job or its worker records it, so a job is never reported twice nor missed.
struct PoolLateJobs {
    let configuration: StallWatchConfiguration

    /// Throws away the records of a previous enable (jobs that returned after it stopped).
    static func discardLeftovers() {
        var record = sw_pool_late_job()
        while sw_pool_take_late(&record) == 1 {}
    }

    /// Reports every late job recorded so far through the recorder of its worker's slot. `known` gives, per slot,
    /// the job the watchdog saw running there at its last look (its task's name was read then).
    func reportPending(
        recorders: (Int) -> StallRecorder?, known: (Int) -> (sequence: UInt64, task: StallReport.TaskDescription)?
    ) {
        var record = sw_pool_late_job()
        while sw_pool_take_late(&record) == 1 {
            guard let recorder = recorders(Int(record.slot)) else { continue }
            report(record, recorder: recorder, seen: known(Int(record.slot)))
        }
    }

    private func report(
        _ record: sw_pool_late_job, recorder: StallRecorder,
        seen: (sequence: UInt64, task: StallReport.TaskDescription)?
    ) {
        let detector = configuration.detectorConfiguration
        let now = sw_monotonic_ns()
        let crossed = record.start_ns &+ detector.thresholdNanos
        let duration = record.end_ns &- record.start_ns
        let stall = StallDetector.Stall(
            sequence: record.job_number &* 2, activity: .beforeSources, startNanos: record.start_ns,
            detectedNanos: now, latencyNanos: now > crossed ? now - crossed : 0,
            isHang: detector.isHang(durationNanos: duration), notes: [])
        var notes: [String] = []
        var task: StallReport.TaskDescription
        if let seen, seen.sequence == record.job_number {
            task = seen.task
        } else {
            task = StallReport.TaskDescription(
                id: record.task_id, priority: Int(record.priority),
                queuedMs: StallReport.milliseconds(record.queued_ns))
            if record.named != 0 {
                notes.append(
                    "the task has a name, but it was not read: the job returned before the pool watchdog looked at it")
            }
        }
        if record.dropped_before > 0 {
            notes.append(
                "\(record.dropped_before) more slow job(s) of this worker returned unseen just before this one and "
                    + "were counted, not recorded: the watchdog was busy for longer than \(SW_POOL_LATE_RECORDS) of them"
            )
        }
        let cause = StallReport.Cause(
            kind: .unknown,
            evidence: [
                "not sampled: the job crossed the threshold and returned \(StallReport.milliseconds(record.end_ns &- min(crossed, record.end_ns))) ms "
                    + "later, before the pool watchdog looked at its worker (the watchdog was busy with other workers)",
                "the duration is the worker's own timing of the job, from its start to its return",
            ])
        PoolCounters.slowJobs.add(1, ordering: .relaxed)
        PoolCounters.unsampledJobs.add(1, ordering: .relaxed)
        recorder.recordUnsampled(
            stall, threadID: record.thread_id, endNanos: record.end_ns, task: task, cause: cause, notes: notes)
    }
}
