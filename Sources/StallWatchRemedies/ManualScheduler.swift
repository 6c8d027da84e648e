// A deterministic LoopScheduler for tests: a clock that moves only when told to, and loop turns run on demand.
import Synchronization

/// A ``LoopScheduler`` whose clock moves only when the test says so and whose loop turns run on the calling
/// thread, one ``tick()`` at a time (as swift-nio's `EmbeddedEventLoop` does for channels).
///
/// A tick mirrors one ``StallWatch/EventLoop`` iteration: due timers fire in order, enqueued blocks run, and if
/// no new block arrived meanwhile the about-to-wait callbacks run. ``advance(by:)`` moves the clock timer by timer,
/// ticking at each fire date, so time-based remedies can be checked to the nanosecond without sleeping.
///
/// Drive it from one thread; blocks may be enqueued from any thread.
public final class ManualScheduler: LoopScheduler {
    private struct Timer {
        var fireAt: UInt64
        var serial: UInt64
        var block: @Sendable () -> Void
    }

    private struct State {
        var now: UInt64
        var serial: UInt64 = 0
        var queued: [@Sendable () -> Void] = []
        var timers: [Timer] = []
        var idleCallbacks: [(serial: UInt64, callback: @Sendable () -> Void)] = []
    }

    private let state: Mutex<State>

    /// - Parameter startNanos: The clock's initial reading.
    public init(startNanos: UInt64 = 1_000_000_000) {
        state = Mutex(State(now: startNanos))
    }

    // MARK: LoopScheduler

    public var uptimeNanos: UInt64 { state.withLock { $0.now } }

    public func enqueue(_ block: @escaping @Sendable () -> Void) {
        state.withLock { $0.queued.append(block) }
    }

    @discardableResult
    public func enqueue(after delay: Duration, _ block: @escaping @Sendable () -> Void) -> ScheduledBlock {
        let serial = state.withLock { state -> UInt64 in
            state.serial += 1
            state.timers.append(Timer(fireAt: state.now &+ Self.nanos(delay), serial: state.serial, block: block))
            return state.serial
        }
        return ScheduledBlock { [self] in state.withLock { $0.timers.removeAll { $0.serial == serial } } }
    }

    @discardableResult
    public func whenAboutToWait(_ callback: @escaping @Sendable () -> Void) -> ScheduledBlock {
        let serial = state.withLock { state -> UInt64 in
            state.serial += 1
            state.idleCallbacks.append((state.serial, callback))
            return state.serial
        }
        return ScheduledBlock { [self] in state.withLock { $0.idleCallbacks.removeAll { $0.serial == serial } } }
    }

    // MARK: Driving the loop

    /// Blocks enqueued and not yet run.
    public var queuedCount: Int { state.withLock { $0.queued.count } }

    /// Timers scheduled and not yet fired or cancelled.
    public var timerCount: Int { state.withLock { $0.timers.count } }

    /// Moves the clock forward without running anything, as if the block running now took `duration`.
    public func moveClock(by duration: Duration) {
        state.withLock { $0.now &+= Self.nanos(duration) }
    }

    /// Runs one loop iteration at the current time: due timers, then enqueued blocks, then — unless a block was
    /// enqueued meanwhile — the about-to-wait callbacks.
    ///
    /// - Returns: True if a timer or an enqueued block ran.
    @discardableResult
    public func tick() -> Bool {
        var ranWork = false
        while let timer = popDueTimer() {
            timer.block()
            ranWork = true
        }
        let blocks = state.withLock { state -> [@Sendable () -> Void] in
            defer { state.queued.removeAll() }
            return state.queued
        }
        for block in blocks { block() }
        ranWork = ranWork || !blocks.isEmpty
        let (moreQueued, idle) = state.withLock { ($0.queued.isEmpty == false, $0.idleCallbacks.map(\.callback)) }
        if !(ranWork && moreQueued) {
            for callback in idle { callback() }
        }
        return ranWork
    }

    /// Ticks until no timer is due and no block is queued (at most `limit` ticks, against runaway loops).
    ///
    /// - Returns: The number of ticks that ran work.
    @discardableResult
    public func runUntilIdle(limit: Int = 100_000) -> Int {
        var busyTicks = 0
        for _ in 0..<limit {
            let ranWork = tick()
            if ranWork { busyTicks += 1 }
            let more = state.withLock { state in
                !state.queued.isEmpty || state.timers.contains { $0.fireAt <= state.now }
            }
            if !ranWork && !more { break }
        }
        return busyTicks
    }

    /// Moves the clock forward by `duration`, stopping at every timer's fire date on the way to run what is due.
    public func advance(by duration: Duration) {
        let target = state.withLock { $0.now &+ Self.nanos(duration) }
        while true {
            runUntilIdle()
            let next = state.withLock { state -> UInt64? in
                let next = state.timers.map(\.fireAt).min()
                guard let next, next <= target else {
                    state.now = max(state.now, target)
                    return nil
                }
                state.now = max(state.now, next)
                return next
            }
            if next == nil { break }
        }
        runUntilIdle()
    }

    private func popDueTimer() -> Timer? {
        state.withLock { state -> Timer? in
            let due = state.timers.indices.filter { state.timers[$0].fireAt <= state.now }
            guard
                let first = due.min(by: {
                    (state.timers[$0].fireAt, state.timers[$0].serial) < (
                        state.timers[$1].fireAt, state.timers[$1].serial
                    )
                })
            else { return nil }
            return state.timers.remove(at: first)
        }
    }

    static func nanos(_ duration: Duration) -> UInt64 {
        let (seconds, attoseconds) = duration.components
        guard seconds >= 0, attoseconds >= 0 else { return 0 }
        return UInt64(seconds) * 1_000_000_000 + UInt64(attoseconds / 1_000_000_000)
    }
}
