// ConcurrencyWatchdog: the one-line switch that times every Swift Concurrency job and reports stuck workers.
import CStallWatchConcurrency
import Dispatch
import Synchronization

/// Watches the Swift Concurrency global executor's pool: every job is timed, and a job that runs past the
/// threshold without suspending is a stall of its worker thread, reported with a `task` section (id,
/// priority), the worker's samples and its cause; every worker stuck while jobs wait is one `saturated` report.
///
/// ```swift
/// try ConcurrencyWatchdog.enable(configuration: .load())
/// // …
/// ConcurrencyWatchdog.disable()
/// ```
///
/// Enabling installs the runtime's `swift_task_enqueueGlobal_hook` (a hook installed before still sees every
/// job first) and routes jobs to StallWatch's own queues, one per priority and as wide as the machine, as the
/// runtime's executor does. Jobs of the main actor, of custom executors and of task-executor preferences do not
/// pass the hook and are not watched (see docs/concurrency.md).
public enum ConcurrencyWatchdog {
    /// The Concurrency runtime layout versions whose job header and hook this code was written against
    /// (Swift 6.3.1 reports 1).
    static let knownLayoutVersions: Set<Int> = [1]

    private struct Running {
        var thread: NamedThread
        var stop: StopFlag
        var table: TaskTable?
    }

    private final class StopFlag: Sendable {
        let value = Atomic<Bool>(false)
    }

    private static let running = Mutex<Running?>(nil)

    /// True while the pool is watched.
    package static var isEnabled: Bool { running.withLock { $0 != nil } }

    /// Starts timing every pool job and the pool watchdog thread (`stallwatch-pool`). Does nothing when already
    /// enabled or when `configuration.enabled` is false.
    ///
    /// - Parameters:
    ///   - configuration: Thresholds, sampling and report settings (the same keys as the loop watchdog).
    ///   - onEvent: Called on the pool watchdog thread for every stall event. Keep it short.
    /// - Throws: `.unsupported` on a Concurrency runtime whose layout is unknown; `.systemCall` when the thread
    ///   cannot start.
    public static func enable(
        configuration: StallWatchConfiguration = StallWatchConfiguration(),
        onEvent: @escaping @Sendable (StallEvent) -> Void = { _ in }
    ) throws(StallWatchError) {
        guard configuration.enabled else { return }
        let version = Int(sw_pool_runtime_layout_version())
        guard knownLayoutVersions.contains(version) else {
            throw StallWatchError(
                .unsupported,
                "the Swift Concurrency runtime's layout version \(version) is not one StallWatch knows "
                    + "(\(knownLayoutVersions.sorted())): the pool is not watched",
                context: ["layoutVersion": String(version)])
        }
        try running.withLock { (state: inout Running?) throws(StallWatchError) in
            guard state == nil else { return }
            let stop = StopFlag()
            // The task table is set up before any job is routed (its rows live in the published file, if any).
            let table = configuration.maxTasks > 0 ? try TaskTable(configuration: configuration) : nil
            if let error = table?.publishError { onEvent(.heartbeatFailed(error)) }
            let watcher = PoolWatcher(configuration: configuration, table: table, emit: onEvent) {
                stop.value.load(ordering: .acquiring)
            }
            // Jobs are routed only once the watcher can follow them: a first stall during its set-up (symbol
            // tables, tens to hundreds of ms) would otherwise go unseen.
            let ready = DispatchSemaphore(value: 0)
            let thread: NamedThread
            do throws(StallWatchError) {
                thread = try NamedThread(name: "stallwatch-pool") { watcher.run { ready.signal() } }
            } catch {
                // The table's C side points into its region: torn down here, or the next enable could not set one
                // up and the region would be unmapped under it.
                table?.tearDown()
                throw error
            }
            ready.wait()
            sw_pool_set_threshold(configuration.detectorConfiguration.thresholdNanos)
            sw_tasks_enable(table == nil ? 0 : 1)
            guard sw_pool_enable() == 0 else {
                sw_tasks_enable(0)
                stop.value.store(true, ordering: .releasing)
                sw_pool_wake()
                thread.join()
                table?.tearDown()
                throw StallWatchError(.unsupported, "the Swift Concurrency runtime has no global enqueue hook")
            }
            state = Running(thread: thread, stop: stop, table: table)
        }
    }

    /// Stops timing jobs and joins the pool watchdog thread; a stall in progress is written as `unrecovered`.
    /// The previous hook is restored unless another one was installed on top of StallWatch's, which then
    /// passes every job straight on.
    public static func disable() {
        running.withLock { state in
            guard let current = state else { return }
            sw_tasks_enable(0)
            _ = sw_pool_disable()
            current.stop.value.store(true, ordering: .releasing)
            sw_pool_wake()
            current.thread.join()
            current.table?.tearDown()
            state = nil
        }
    }

    /// True while `swift_task_enqueueGlobal_hook` is StallWatch's (enabled, or left passing jobs through).
    static var hookInstalled: Bool { sw_pool_hook_is_ours() != 0 }

    /// The id of the task running the caller (nil outside a task): what a report's `task.id` names, for
    /// logging it next to a request.
    package static var currentTaskID: UInt64? {
        let id = sw_pool_current_task_id()
        return id == 0 ? nil : id
    }

    /// The pool's counters and histograms since the process started.
    package static var statistics: PoolStatistics { PoolStatistics.read() }

    /// Runs `body` with the task table while the pool is watched (nil otherwise); the table is not torn down
    /// meanwhile.
    static func withTable<Result>(_ body: (TaskTable?) -> Result) -> Result {
        running.withLock { state in body(state?.table) }
    }
}
