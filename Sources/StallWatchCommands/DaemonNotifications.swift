// DaemonNotifications: `stallwatch daemon` under systemd — READY after the first scan, STATUS, WATCHDOG=1.
import Dispatch
import StallWatch
import StallWatchSidecar
import Synchronization

/// sd_notify for `stallwatch daemon` (``SystemdNotifier``); nothing happens without `NOTIFY_SOCKET`.
///
/// `READY=1` once the first scan of the heartbeat directory is done (the daemon is watching); `STATUS=` with
/// the number of processes watched and stalled now; `WATCHDOG=1` only while the daemon is healthy — its scan
/// loop completed a scan within three scan intervals (at least 3 s). A stall of a watched process is reported,
/// not a reason for systemd to restart the daemon.
final class DaemonNotifications: Sendable {
    private let notifier: SystemdNotifier
    private let directory: String
    private let healthyWithinNanos: UInt64
    private let lastScanNanos = Atomic<UInt64>(0)
    private let counts = Mutex<(watched: Int, stalled: Set<Int32>, stalls: Int, announced: String?)>(
        (0, [], 0, nil))

    init(environment: [String: String], directory: String, scanInterval: Duration) throws {
        notifier = try SystemdNotifier(environment: environment)
        self.directory = directory
        let (seconds, attoseconds) = scanInterval.components
        let intervalNanos = UInt64(max(0, seconds)) * 1_000_000_000 + UInt64(max(0, attoseconds) / 1_000_000_000)
        healthyWithinNanos = max(3 * intervalNanos, 3_000_000_000)
    }

    private static func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

    /// After each scan: READY=1 the first time, and the keep-alive pings start.
    func scanned(watched: Int) {
        guard notifier.isEnabled else { return }
        let first = lastScanNanos.exchange(Self.now(), ordering: .acquiringAndReleasing) == 0
        counts.withLock { $0.watched = watched }
        if first {
            try? notifier.startWatchdogPings { [self] in
                Self.now() - lastScanNanos.load(ordering: .acquiring) < healthyWithinNanos
            }
            try? notifier.ready(status: statusLine())
            counts.withLock { $0.announced = statusLine(locked: $0) }
        } else {
            announceIfChanged()
        }
    }

    /// A watched process's stall began or ended: STATUS follows.
    func observe(_ event: SidecarDaemon.Event) {
        guard notifier.isEnabled, case .target(let pid, .stall(let stall)) = event else { return }
        counts.withLock { counts in
            switch stall {
            case .began: counts.stalled.insert(pid)
            case .ended:
                counts.stalled.remove(pid)
                counts.stalls += 1
            default: break
            }
        }
        announceIfChanged()
    }

    /// STOPPING=1 and no more pings.
    func stopping() {
        guard notifier.isEnabled else { return }
        try? notifier.stopping()
        notifier.stopWatchdogPings()
    }

    private func announceIfChanged() {
        let line: String? = counts.withLock { counts in
            let line = statusLine(locked: counts)
            guard line != counts.announced else { return nil }
            counts.announced = line
            return line
        }
        if let line { try? notifier.status(line) }
    }

    private func statusLine() -> String { counts.withLock { statusLine(locked: $0) } }

    private func statusLine(locked counts: (watched: Int, stalled: Set<Int32>, stalls: Int, announced: String?))
        -> String
    {
        var line = "watching \(counts.watched) process\(counts.watched == 1 ? "" : "es") in \(directory)"
        if !counts.stalled.isEmpty {
            line += "; stalled now: pid " + counts.stalled.sorted().map(String.init).joined(separator: ", ")
        }
        return line + "; \(counts.stalls) stall\(counts.stalls == 1 ? "" : "s") reported"
    }
}
