// The watchdog's health verdict (for systemd's watchdog) and its async run() for service lifecycles.
import CStallWatchCore
import Synchronization

extension Watchdog {
    /// True while the watched loop is turning: no stall is being followed and the loop has not sat in one busy
    /// phase for longer than the threshold (which also covers the moments before the watchdog notices, and a
    /// watchdog that is not running). Safe from any thread; lock-free.
    public var isHealthy: Bool {
        if stallInProgress.load(ordering: .acquiring) { return false }
        let snapshot = loop.state.snapshot()
        guard snapshot.isBusy else { return true }
        // The phase start is a CLOCK_MONOTONIC_COARSE reading: compare with the same clock.
        let now = sw_monotonic_coarse_ns()
        let busyFor = now > snapshot.phaseStartNanos ? now - snapshot.phaseStartNanos : 0
        return !configuration.detectorConfiguration.isStall(busyNanos: busyFor)
    }

    /// Runs the watchdog until the calling task is cancelled, then stops it.
    ///
    /// Made for service lifecycles: with swift-service-lifecycle,
    /// `struct StallWatchService: Service { let watchdog: Watchdog; func run() async throws { try await watchdog.run() } }`.
    /// Returns (without throwing) on cancellation; a stall in progress at that moment gets its final report
    /// with status `unrecovered`. When `configuration.enabled` is false it still waits for cancellation, so a
    /// service group does not take an early return for a failure.
    ///
    /// - Throws: What ``start()`` throws.
    /// - Warning: Stopping joins the watchdog thread, which may be finishing a report (tens of ms): the
    ///   cooperative thread running this task is blocked that long once, at shutdown.
    public func run() async throws(StallWatchError) {
        try start()
        defer { stop() }
        let gate = CancellationGate()
        await withTaskCancellationHandler {
            await gate.wait()
        } onCancel: {
            gate.open()
        }
    }
}

/// A one-shot gate a task waits on until it is opened (from a cancellation handler, on any thread).
final class CancellationGate: Sendable {
    private struct State {
        var opened = false
        var waiter: CheckedContinuation<Void, Never>?
    }
    private let state = Mutex(State())

    func wait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let resumeNow = state.withLock { s -> Bool in
                if s.opened { return true }
                s.waiter = continuation
                return false
            }
            if resumeNow { continuation.resume() }
        }
    }

    func open() {
        let waiter = state.withLock { s -> CheckedContinuation<Void, Never>? in
            s.opened = true
            defer { s.waiter = nil }
            return s.waiter
        }
        waiter?.resume()
    }
}
