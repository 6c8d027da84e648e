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
/// threshold, or a sample). When every worker is idle it sleeps one threshold, and parks until a job starts if
/// none started meanwhile (or until a suspended task's hung-await threshold comes, when the task table is kept):
/// an idle pool costs no wake-ups, and a busy one about one per threshold. A job that crossed
/// the threshold and returned while this thread was busy elsewhere is reported late from its worker's own record
/// (``PoolLateJobs``); that record wakes the thread.
final class PoolWatcher: @unchecked Sendable {  // Runs on the pool watchdog's thread only, after hand-off.
    private let configuration: StallWatchConfiguration
    private let emit: @Sendable (StallEvent) -> Void
    private let isStopping: @Sendable () -> Bool
    private var followers: [StallFollower<PoolWorkerProgressSource>] = []
    private let saturation: PoolSaturationWatcher
    /// Names for every worker's provisional reports and the saturation's stacks: one for the process, set up by the
    /// first pool watchdog and kept, used only by the pool watchdog's thread (one at a time: `disable` joins it).
    static let quickSymbolicator = Symbolicator(processID: getpid(), mode: .fast)
    /// The job each slot ran at the last look, so that a task's name is read once per job.
    private var tasks: [(sequence: UInt64, task: StallReport.TaskDescription)?] = []
    /// The task table this thread keeps, when there is one.
    private let table: TaskTable?
    /// The hung-await detector over the table, when there is a table and `hungAwaitThresholdMs` is above 0.
    private let hungAwaits: HungAwaitWatcher?

    init(
        configuration: StallWatchConfiguration, table: TaskTable?, emit: @escaping @Sendable (StallEvent) -> Void,
        isStopping: @escaping @Sendable () -> Bool
    ) {
        self.configuration = configuration
        self.table = table
        self.emit = emit
        self.isStopping = isStopping
        saturation = PoolSaturationWatcher(configuration: configuration, emit: emit)
        hungAwaits =
            table == nil
            ? nil : HungAwaitWatcher(configuration: configuration, symbolicator: Self.quickSymbolicator, emit: emit)
    }

    /// Follows the workers until stopped; `ready` is called once the recorders are set up, before the first look.
    func run(ready: () -> Void = {}) {
        let threshold = configuration.intervals.threshold
        // Recorders for the workers to come are set up now, not when their first job is already stuck.
        addFollowers(atLeast: Int(sw_pool_width()) + 2)
        followers.first?.recorder.warmUp()
        if configuration.leadUp {
            let settings = configuration.leadUpSettings
            sw_pool_leadup_configure(
                settings.windowNanos, settings.bucketNanos, settings.itemMinNanos, settings.itemCapacity)
        }
        defer { sw_pool_leadup_configure(0, 0, 0, 0) }
        PoolLateJobs.discardLeftovers()
        let late = PoolLateJobs(configuration: configuration)
        ready()
        var jobsSeen: UInt64 = 0
        while true {
            // The wake generation is read before the stop flag: a stop after this check then ends the sleep or
            // park below at once (read inside them, such a stop was lost, and disable() joined forever).
            let seen = sw_pool_wake_generation()
            if isStopping() { break }
            // Read before the looks: a job that starts while they run (or later) makes the park below return at
            // once. Read after them, it would count a job no look saw, and the watchdog would park through its stall.
            var totals = sw_pool_totals()
            sw_pool_read_totals(&totals)
            addFollowers()
            // Jobs that returned unseen since the last look, before that look's view of each slot is replaced: the
            // job a look saw start has its task's name.
            late.reportPending(
                recorders: { $0 < followers.count ? followers[$0].recorder : nil },
                known: { $0 < tasks.count ? tasks[$0] : nil })
            // The saturation first: its end is seen by this look, not after the workers' final reports.
            var looks = StallFollower<PoolWorkerProgressSource>.Looks(
                deadline: saturation.look(now: sw_monotonic_ns(), symbolicator: Self.quickSymbolicator))
            for index in followers.indices {
                tasks[index] = PoolWorkerProgressSource.task(ofSlot: Int32(index), previous: tasks[index])
                followers[index].recorder.nextTask = tasks[index]?.task
                keepLeadUp(ofSlot: index)
                // Never "timed out" for the late-wake-up guard: one thread serves every worker, so waking late for
                // one worker is usually this thread writing another's report, not the process going unscheduled
                // (the worker measures its job's duration itself either way; the suspend guard still applies).
                _ = looks.fold(followers[index].look(timedOut: false))
                // The saturation again after each worker: a worker's stall that began in this look (its first
                // sample, the snapshot of every thread, on a loaded machine hundreds of ms) must not hide a
                // saturation that reached the threshold meanwhile, and may end before the next round of looks.
                looks.fold(saturation.look(now: sw_monotonic_ns(), symbolicator: Self.quickSymbolicator))
            }
            // The task table, after the workers: a job that ended before their look has its end in a ring by now
            // (a worker wakes this thread when its ring is half full, so a busy pool is drained in time too).
            if table != nil { sw_tasks_drain(sw_monotonic_ns()) }
            let hungDeadline = hungAwaits?.look(now: sw_monotonic_ns(), jobsRan: totals.jobs_started != jobsSeen)
            jobsSeen = totals.jobs_started
            if looks.lookAgain { continue }
            if let deadline = looks.deadline {
                // A worker is busy: its next deadline (its threshold, its next sample) is at most a threshold away.
                _ = sw_pool_sleep_until(min(deadline, hungDeadline ?? .max), seen)
                continue
            }
            // Every worker idle: one threshold of grace (a job that starts meanwhile is looked at by its own
            // threshold), then park until a job starts (none started since the looks, or the park returns at once
            // and the loop looks again). The table is drained before the park: the last jobs' ends (a task's final
            // suspension) must not wait in a ring for the next job.
            let grace = min(sw_monotonic_ns() + threshold, hungDeadline ?? .max)
            if sw_pool_sleep_until(grace, seen) == 1, !isStopping() {
                if table != nil { sw_tasks_drain(sw_monotonic_ns()) }
                // A suspended task's threshold is a deadline too: park until it, not for good. (A timed sleep
                // instead would leave a job that starts meanwhile unlooked at until that deadline, seconds away.)
                if let due = hungAwaits?.look(now: sw_monotonic_ns(), jobsRan: true) {
                    _ = sw_pool_park_until(totals.jobs_started, seen, due)
                } else {
                    _ = sw_pool_park(totals.jobs_started, seen)
                }
            }
        }
        for index in followers.indices {
            followers[index].recorder.abandon(
                now: sw_monotonic_ns(), reason: "the pool watchdog stopped while the job was still running")
            followers[index].recorder.waitForLineFills()
        }
        saturation.stop()
        hungAwaits?.stop(now: sw_monotonic_ns())
    }

    /// The worker's lead-up: its rings, once its first job has made them, handed to its recorder; and the worker
    /// thread's scheduler figures, read at this look (the recorder reads them at most once a bucket, and only while
    /// the worker runs jobs: the watchdog looks at least every threshold then, and parks while the pool idles).
    private func keepLeadUp(ofSlot index: Int) {
        guard configuration.leadUp else { return }
        let recorder = followers[index].recorder
        if recorder.leadUp == nil, let rings = sw_pool_slot_leadup(Int32(index)) {
            recorder.leadUp = LeadUpRecorder(ring: LeadUpRing(borrowing: rings), labels: .taskIDs)
        }
        var view = sw_pool_slot_view()
        guard let leadUp = recorder.leadUp, sw_pool_slot(Int32(index), &view) == 0, view.thread_id != 0 else { return }
        _ = leadUp.tick(
            now: sw_monotonic_ns(), threadID: view.thread_id, sequence: view.sequence, isBusy: view.busy != 0)
    }

    private func addFollowers(atLeast minimum: Int = 0) {
        let count = max(minimum, Int(sw_pool_slot_count()))
        while tasks.count < count { tasks.append(nil) }
        while followers.count < count {
            let recorder = StallRecorder(
                configuration: configuration, loopName: "concurrency-pool", target: .concurrencyPool(),
                emit: PoolCounters.counting(saturation: false, emit), quickSymbolicator: Self.quickSymbolicator)
            followers.append(
                StallFollower(
                    source: PoolWorkerProgressSource(slot: Int32(followers.count)), recorder: recorder,
                    configuration: configuration.detectorConfiguration, watcher: .poolWatchdog))
        }
    }
}
