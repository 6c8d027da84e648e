// A throttler: requests coalesce so an action runs at most once per loop turn or per interval.
import Synchronization

/// Runs an action at most once per loop turn or once per interval, however often it is requested; requests
/// that arrive while one is pending coalesce into it, and the latest action is the one that runs.
///
/// The shape of "re-render on every change" done right: a thousand change notifications in one loop turn become
/// one render at the end of the turn (``Rate/oncePerLoopTurn``), or a stream of progress updates becomes one
/// update every 100 ms (``Rate/oncePerInterval(_:)``: the first request runs at once, later ones at most once
/// per interval after the previous run, the last request always runs).
///
/// ```swift
/// let render = Throttler(scheduler: loop, rate: .oncePerLoopTurn)
/// for change in changes { render.call { view.render(model) } }   // one render
/// ```
public final class Throttler: Sendable {
    /// How often the action may run.
    public enum Rate: Sendable, Equatable {
        /// At most once per loop iteration: the run happens in the loop's next `beforeSources` phase.
        case oncePerLoopTurn
        /// At most once per interval, measured from the start of one run to the start of the next.
        case oncePerInterval(Duration)
    }

    private struct State {
        var action: (@Sendable () -> Void)?
        var scheduled = false
        var lastRun: UInt64?
        var runs = 0
        var requests = 0
    }

    private let scheduler: any LoopScheduler
    public let rate: Rate
    private let state = Mutex(State())

    /// - Parameters:
    ///   - scheduler: The loop the action runs on.
    ///   - rate: At most once per loop turn, or once per interval.
    public init(scheduler: any LoopScheduler, rate: Rate) {
        self.scheduler = scheduler
        self.rate = rate
    }

    /// Requests a run of `action`, replacing the action of a pending request. Safe from any thread.
    ///
    /// - Warning: `action` runs on the loop thread.
    public func call(_ action: @escaping @Sendable () -> Void) {
        let now = scheduler.uptimeNanos
        state.withLock { state in
            state.action = action
            state.requests += 1
            guard !state.scheduled else { return }
            state.scheduled = true
            switch rate {
            case .oncePerLoopTurn:
                scheduler.enqueue { [self] in runPending() }
            case .oncePerInterval(let interval):
                let next = state.lastRun.map { $0 &+ ManualScheduler.nanos(interval) } ?? now
                if next <= now {
                    scheduler.enqueue { [self] in runPending() }
                } else {
                    scheduler.enqueue(after: .nanoseconds(Int64(next - now))) { [self] in runPending() }
                }
            }
        }
    }

    /// How many times an action has run.
    var runCount: Int { state.withLock { $0.runs } }

    /// How many requests were made (``call(_:)``), run or coalesced.
    var requestCount: Int { state.withLock { $0.requests } }

    private func runPending() {
        let now = scheduler.uptimeNanos
        let action = state.withLock { state -> (@Sendable () -> Void)? in
            defer {
                state.action = nil
                state.scheduled = false
            }
            guard state.action != nil else { return nil }
            state.lastRun = now
            state.runs += 1
            return state.action
        }
        action?()
    }
}
