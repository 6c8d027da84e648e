// DaemonNotifications: `stallwatch daemon` under systemd — READY after the first scan, STATUS, WATCHDOG=1.
import Dispatch
import StallWatch
import StallWatchSidecar
import Synchronization

/// sd_notify for `stallwatch daemon` (``SystemdNotifier``); nothing happens without `NOTIFY_SOCKET`.
///
/// `READY=1` once the first scan of the heartbeat directory is done (the daemon is watching); `STATUS=` with
/// the number of processes watched and the loop threads stalled now (``DaemonStatus``); `WATCHDOG=1` only while the daemon itself is healthy: its
/// scan loop completed a scan within three scan intervals (at least 3 s), and every watcher's loop turned within
/// that time too (or three of its poll intervals, if longer). A stuck watcher means a process nobody watches, and
/// a restart fixes that; a stall of a watched process is reported, not a reason for systemd to restart the
/// daemon — restarting the daemon cannot unstick it.
final class DaemonNotifications: Sendable {
    private let notifier: SystemdNotifier
    private let daemon: LateReference<SidecarDaemon>
    private let directory: String
    private let healthyWithinNanos: UInt64
    private let lastScanNanos = Atomic<UInt64>(0)
    private let counts = Mutex<(status: DaemonStatus, announced: String?)>((DaemonStatus(), nil))

    init(environment: [String: String], directory: String, scanInterval: Duration, daemon: LateReference<SidecarDaemon>)
        throws
    {
        notifier = try SystemdNotifier(environment: environment)
        self.daemon = daemon
        self.directory = directory
        healthyWithinNanos = max(3 &* scanInterval.nanoseconds, 3_000_000_000)
    }

    private static func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

    /// The pids of the watchers that have not turned within the health window.
    private func stuckWatchers() -> [Int32] {
        Array(Set(daemon.object?.stuckWatchers(allowanceNanos: healthyWithinNanos).map(\.pid) ?? [])).sorted()
    }

    /// Scans keep coming and every watcher keeps turning.
    var isHealthy: Bool {
        Self.now() - lastScanNanos.load(ordering: .acquiring) < healthyWithinNanos && stuckWatchers().isEmpty
    }

    /// After each scan: READY=1 the first time, and the keep-alive pings start.
    func scanned(watched: Int) {
        guard notifier.isEnabled else { return }
        let first = lastScanNanos.exchange(Self.now(), ordering: .acquiringAndReleasing) == 0
        counts.withLock { $0.status.watched = watched }
        if first {
            try? notifier.startWatchdogPings { [self] in isHealthy }
            let stuck = stuckWatchers()
            let line = counts.withLock { counts in
                let line = counts.status.line(directory: directory, stuck: stuck)
                counts.announced = line
                return line
            }
            try? notifier.ready(status: line)
        } else {
            announceIfChanged()
        }
    }

    /// A stall of a watched loop thread began or ended: STATUS follows.
    func observe(_ event: SidecarDaemon.Event) {
        guard notifier.isEnabled, case .target(let pid, .stall(let stall)) = event else { return }
        counts.withLock { $0.status.observe(pid: pid, stall) }
        announceIfChanged()
    }

    /// STOPPING=1 and no more pings.
    func stopping() {
        guard notifier.isEnabled else { return }
        try? notifier.stopping()
        notifier.stopWatchdogPings()
    }

    private func announceIfChanged() {
        let stuck = stuckWatchers()
        let line: String? = counts.withLock { counts in
            let line = counts.status.line(directory: directory, stuck: stuck)
            guard line != counts.announced else { return nil }
            counts.announced = line
            return line
        }
        if let line { try? notifier.status(line) }
    }
}
