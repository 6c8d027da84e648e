// The small slice of a run loop the remedies need, so they run on an EventLoop and, in tests, on a manual clock.
import Dispatch
import StallWatch

#if canImport(Glibc)
    import Glibc
#endif

/// Something that runs blocks on one loop thread: now, soon, after a delay, and when the loop is about to wait.
///
/// ``EventLoop`` conforms; ``ManualScheduler`` is the deterministic stand-in for tests, whose clock moves only
/// when told to. Every remedy that touches the loop takes a `LoopScheduler`, so its timing can be tested without
/// sleeping.
public protocol LoopScheduler: AnyObject, Sendable {
    /// Monotonic time in nanoseconds, in the scheduler's own clock.
    var uptimeNanos: UInt64 { get }

    /// Runs `block` on the loop thread soon (in the loop's next `beforeSources` phase). Safe from any thread.
    func enqueue(_ block: @escaping @Sendable () -> Void)

    /// Runs `block` on the loop thread once `delay` has passed. Safe from any thread.
    ///
    /// - Returns: A handle that cancels the block if it has not run yet.
    @discardableResult
    func enqueue(after delay: Duration, _ block: @escaping @Sendable () -> Void) -> ScheduledBlock

    /// Calls `callback` on the loop thread every time the loop is about to wait for work, until the returned
    /// handle is cancelled.
    @discardableResult
    func whenAboutToWait(_ callback: @escaping @Sendable () -> Void) -> ScheduledBlock
}

/// A block scheduled on a ``LoopScheduler``; cancel it to keep it from running (again).
public final class ScheduledBlock: Sendable {
    private let onCancel: @Sendable () -> Void

    /// - Parameter onCancel: What cancelling does; called at most once.
    public init(onCancel: @escaping @Sendable () -> Void) {
        self.onCancel = onCancel
    }

    /// Stops the block from running (again). Safe from any thread.
    public func cancel() { onCancel() }
}

extension EventLoop: LoopScheduler {
    public var uptimeNanos: UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
    }

    public func enqueue(_ block: @escaping @Sendable () -> Void) {
        perform(block)
    }

    @discardableResult
    public func enqueue(after delay: Duration, _ block: @escaping @Sendable () -> Void) -> ScheduledBlock {
        let timer = schedule(after: delay, block)
        return ScheduledBlock { timer.cancel() }
    }

    @discardableResult
    public func whenAboutToWait(_ callback: @escaping @Sendable () -> Void) -> ScheduledBlock {
        // Order high: other beforeWaiting observers (bookkeeping) go first, idle work last.
        let observer = addObserver(activities: .beforeWaiting, order: Int.max) { _ in callback() }
        return ScheduledBlock { [weak self] in self?.removeObserver(observer) }
    }
}
