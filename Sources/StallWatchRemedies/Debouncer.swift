// A debouncer: of a burst of calls, only the last one runs, once the calls have been quiet for a while.
import Synchronization

/// Runs only the last of a burst of actions, once no new action has arrived for `delay`, on the loop.
///
/// Typing-ahead search, "save after the user stops editing", re-rendering after a flurry of change
/// notifications: each ``call(_:)`` replaces the pending action and pushes the deadline back; the action runs on
/// the loop thread when the deadline passes with no newer call. One timer is armed per quiet period, not one per
/// call: a call only moves the deadline, and the timer re-arms itself if it fires early.
///
/// ```swift
/// let saveSoon = Debouncer(scheduler: loop, delay: .milliseconds(200))
/// saveSoon.call { store.save() }   // any thread, any number of times
/// ```
public final class Debouncer: Sendable {
    private struct State {
        var action: (@Sendable () -> Void)?
        var deadline: UInt64 = 0
        var timer: ScheduledBlock?
        var runs = 0
    }

    private let scheduler: any LoopScheduler
    private let delayNanos: UInt64
    private let state = Mutex(State())

    /// - Parameters:
    ///   - scheduler: The loop the action runs on (an `EventLoop`, or a `ManualScheduler` in tests).
    ///   - delay: How long calls must stop before the last one runs.
    public init(scheduler: any LoopScheduler, delay: Duration) {
        self.scheduler = scheduler
        self.delayNanos = ManualScheduler.nanos(delay)
    }

    /// Makes `action` the one to run after the next quiet period, replacing any pending one. Safe from any thread.
    ///
    /// - Warning: `action` runs on the loop thread.
    public func call(_ action: @escaping @Sendable () -> Void) {
        let now = scheduler.uptimeNanos
        state.withLock { state in
            state.action = action
            state.deadline = now &+ delayNanos
            if state.timer == nil { state.timer = arm(after: delayNanos) }
        }
    }

    /// Drops the pending action, if any.
    public func cancel() {
        state.withLock { state in
            state.action = nil
            state.timer?.cancel()
            state.timer = nil
        }
    }

    /// Whether an action is waiting for its quiet period.
    public var isPending: Bool { state.withLock { $0.action != nil } }

    /// How many actions have run.
    var runCount: Int { state.withLock { $0.runs } }

    private func arm(after nanos: UInt64) -> ScheduledBlock {
        scheduler.enqueue(after: .nanoseconds(Int64(nanos))) { [self] in fire() }
    }

    private func fire() {
        let now = scheduler.uptimeNanos
        let action = state.withLock { state -> (@Sendable () -> Void)? in
            state.timer = nil
            guard let action = state.action else { return nil }
            if now < state.deadline {
                // A call moved the deadline after this timer was armed: wait for the rest of the quiet period.
                state.timer = arm(after: state.deadline - now)
                return nil
            }
            state.action = nil
            state.runs += 1
            return action
        }
        action?()
    }
}
