// ServiceNotifications: `serve` under systemd — READY once serving, STATUS per stall, WATCHDOG=1 while healthy.
import StallWatch

/// sd_notify for the demo service (``SystemdNotifier``): nothing happens without `NOTIFY_SOCKET`.
///
/// `READY=1` with the port once the loop is about to serve; `WATCHDOG=1` every half `WATCHDOG_USEC` only while
/// the watchdog calls the loop healthy (not from a stall's `began` to its `ended`), so `WatchdogSec=` restarts a
/// service whose loop stays stuck; a `STATUS=` line when a stall begins and ends.
final class ServiceNotifications: Sendable {
    private let notifier: SystemdNotifier?

    init() {
        do {
            notifier = try SystemdNotifier()
        } catch {
            Swift.print("stallwatch-demo: systemd notifications off: \(error.message)")
            notifier = nil
        }
    }

    /// Starts the keep-alive pings (only while `watchdog` is healthy) and says the service is ready.
    func serving(port: Int, mode: String, watchdog: Watchdog) {
        guard let notifier, notifier.isEnabled else { return }
        try? notifier.startWatchdogPings(for: watchdog)
        try? notifier.ready(status: "serving on 127.0.0.1:\(port) (\(mode)); no stall yet")
    }

    /// A readable `STATUS=` for stall events.
    func observe(_ event: StallEvent) {
        guard let notifier, notifier.isEnabled else { return }
        switch event {
        case .began(let report):
            try? notifier.status(
                "loop stalled: stuck in \(report.loop.phase) for over \(Int(report.detection.thresholdMs)) ms")
        case .ended(let report):
            let top = report.applicationFrame?.function ?? "?"
            try? notifier.status("serving; last stall \(Int(report.durationMs)) ms in \(top)")
        default: break
        }
    }

    /// `STOPPING=1`, and no more pings.
    func stopping() {
        guard let notifier, notifier.isEnabled else { return }
        try? notifier.stopping()
        notifier.stopWatchdogPings()
    }
}
