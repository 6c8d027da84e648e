// File-descriptor and signal sources whose handlers run on an EventLoop, built on Dispatch sources.
import Dispatch
import Synchronization

/// A Dispatch source whose events are handled on an ``EventLoop``'s thread. Cancel it to stop.
///
/// The Dispatch source fires on a private queue; each event suspends it and enqueues the handler on the loop,
/// which resumes the source after the handler ran, so a level-triggered descriptor does not flood the loop.
public final class LoopSource: @unchecked Sendable {  // Dispatch sources are thread-safe; `state` guards the rest.
    private struct State {
        var suspended = false
        var cancelled = false
    }

    private let source: any DispatchSourceProtocol
    private let state = Mutex(State())
    /// Signalled once Dispatch has let go of the source (its cancel handler ran).
    private let released = DispatchSemaphore(value: 0)

    init(source: any DispatchSourceProtocol) {
        self.source = source
    }

    func start(on loop: EventLoop, label: UInt32, handler: @escaping @Sendable () -> Void) {
        source.setEventHandler { [self] in
            let shouldDeliver = state.withLock { state -> Bool in
                guard !state.cancelled, !state.suspended else { return false }
                state.suspended = true
                return true
            }
            guard shouldDeliver else { return }
            source.suspend()
            loop.perform(labelID: label) { [self] in
                if !isCancelled { handler() }
                resumeAfterDelivery()
            }
        }
        source.setCancelHandler { [released] in released.signal() }
        source.activate()
    }

    private func resumeAfterDelivery() {
        let resume = state.withLock { state -> Bool in
            guard state.suspended else { return false }
            state.suspended = false
            return true
        }
        if resume { source.resume() }
    }

    package var isCancelled: Bool { state.withLock { $0.cancelled } }

    /// Stops delivering events. Safe from any thread, any number of times.
    public func cancel() {
        let resume = state.withLock { state -> Bool in
            guard !state.cancelled else { return false }
            state.cancelled = true
            defer { state.suspended = false }
            return state.suspended
        }
        source.cancel()
        // A suspended source must be resumed before it is released.
        if resume { source.resume() }
    }

    /// Cancels, then waits until Dispatch has let go of the descriptor (its cancel handler ran): only then may
    /// the descriptor be closed, since a descriptor closed while Dispatch still watches it — or reused by the
    /// next `open` — corrupts Dispatch's own bookkeeping of it. Call it once, off the loop's source queue.
    ///
    /// - Returns: False if Dispatch did not let go within `timeout` (then do not close the descriptor).
    @discardableResult
    public func cancelAndWait(timeout: Duration = .seconds(10)) -> Bool {
        cancel()
        let nanos = Int(clamping: timeout.nanoseconds)
        return released.wait(timeout: .now() + .nanoseconds(nanos)) == .success
    }

    deinit { cancel() }
}
