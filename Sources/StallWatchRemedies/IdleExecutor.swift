// Idle-time execution: queued tasks run when the loop is about to wait, within a time budget per idle period.
import Synchronization

/// Runs queued tasks when the loop has nothing else to do: in the `beforeWaiting` phase, after every timer,
/// source and performed block of the turn, for at most `budgetPerIdle` per idle period.
///
/// The lowest priority there is on a loop: prefetching, cache trimming, statistics, compaction. A task never
/// delays a request that is already waiting, only one that arrives while the task runs, and at most by one
/// task's duration (the budget is checked between tasks). While tasks remain after the budget is spent, the
/// executor wakes the loop once so it comes back to them after serving whatever is ready.
///
/// ```swift
/// let idle = IdleExecutor(scheduler: loop, budgetPerIdle: .milliseconds(2))
/// idle.submit { cache.trim() }
/// ```
///
/// - Warning: StallWatch counts `beforeWaiting` as idle, so the watchdog does not see time spent in idle tasks:
///   keep each task short (well under a millisecond is the intent) and the budget small.
public final class IdleExecutor: Sendable {
    private struct State {
        var tasks: [@Sendable () -> Void] = []
        var head = 0
        var ran = 0
        var idlePeriods = 0
        var wakeRequested = false
        var pending: Int { tasks.count - head }
    }

    private let scheduler: any LoopScheduler
    /// Loop time idle tasks may use each time the loop is about to wait.
    public let budgetPerIdle: Duration
    private let budgetNanos: UInt64
    private let state = Mutex(State())
    private let registration = Mutex<ScheduledBlock?>(nil)

    /// - Parameters:
    ///   - scheduler: The loop whose idle time is used.
    ///   - budgetPerIdle: Time tasks may use per idle period; at least one task runs per period.
    public init(scheduler: any LoopScheduler, budgetPerIdle: Duration = .milliseconds(2)) {
        self.scheduler = scheduler
        self.budgetPerIdle = budgetPerIdle
        self.budgetNanos = ManualScheduler.nanos(budgetPerIdle)
        let block = scheduler.whenAboutToWait { [weak self] in self?.runIdleTasks() }
        registration.withLock { $0 = block }
    }

    deinit { registration.withLock { $0?.cancel() } }

    /// Queues `task` to run in a later idle period, after the tasks queued before it. Safe from any thread.
    ///
    /// - Warning: `task` runs on the loop thread.
    public func submit(_ task: @escaping @Sendable () -> Void) {
        let wake = state.withLock { state -> Bool in
            state.tasks.append(task)
            guard !state.wakeRequested else { return false }
            state.wakeRequested = true
            return true
        }
        // A loop asleep with no timer would not reach beforeWaiting again by itself.
        if wake { scheduler.enqueue {} }
    }

    /// Tasks queued and not yet run.
    public var pendingCount: Int { state.withLock { $0.pending } }

    /// Tasks run so far.
    var completedCount: Int { state.withLock { $0.ran } }

    /// Idle periods in which at least one task ran.
    var idlePeriodsUsed: Int { state.withLock { $0.idlePeriods } }

    /// Drops every queued task.
    public func cancelAll() {
        state.withLock {
            $0.tasks.removeAll()
            $0.head = 0
        }
    }

    private func runIdleTasks() {
        let start = scheduler.uptimeNanos
        var ranAny = false
        while let task = nextTask() {
            if !ranAny {
                ranAny = true
                state.withLock { $0.idlePeriods += 1 }
            }
            task()
            state.withLock { $0.ran += 1 }
            if scheduler.uptimeNanos &- start >= budgetNanos { break }
        }
        let more = state.withLock { state -> Bool in
            state.wakeRequested = state.pending > 0
            return state.wakeRequested
        }
        // Budget spent with tasks left: turn the loop once more (serving anything that is ready) and return.
        if more { scheduler.enqueue {} }
    }

    private func nextTask() -> (@Sendable () -> Void)? {
        state.withLock { state in
            guard state.head < state.tasks.count else {
                state.tasks.removeAll(keepingCapacity: true)
                state.head = 0
                return nil
            }
            defer { state.head += 1 }
            return state.tasks[state.head]
        }
    }
}
