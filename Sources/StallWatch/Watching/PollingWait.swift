// PollingWait: how a /proc watcher waits between looks at a thread: a poll interval, cut short by a stop.
import CStallWatchCore
import Dispatch

/// The wait of the sidecar's progress sources: another process cannot signal the sidecar, so it looks every
/// poll interval — sooner when the detector's deadline or the next sample comes first — and a stop request
/// (``wakeup``) cuts the wait short.
package struct PollingWait: Sendable {
    /// Time between looks.
    package let intervalNanos: UInt64
    /// Signalled to end a wait early (a stop).
    package let wakeup: DispatchSemaphore

    package init(intervalNanos: UInt64, wakeup: DispatchSemaphore) {
        self.intervalNanos = intervalNanos
        self.wakeup = wakeup
    }

    /// Waits until the next look; always reports a timeout (a poll has no other reason to end but a stop).
    package func wait(for wait: StallDetector.Wait, nextSampleAt: UInt64?) -> Bool {
        let after = sw_monotonic_ns()
        var deadline = after &+ intervalNanos
        if let due = wait.deadline(nextSampleAt: nextSampleAt) { deadline = min(deadline, max(due, after)) }
        let now = sw_monotonic_ns()
        if deadline > now { _ = wakeup.wait(timeout: .now() + .nanoseconds(Int(deadline - now))) }
        return true
    }
}
