// DaemonReference: the daemon, for its own event handler (which is created before the daemon is).
import StallWatchSidecar
import Synchronization

/// Holds the ``SidecarDaemon`` once it exists, so that its event handler can ask it about the process an event
/// is about (its loop name and executable, for metrics labels).
final class DaemonReference: Sendable {
    private let stored = Mutex<SidecarDaemon?>(nil)

    var daemon: SidecarDaemon? {
        get { stored.withLock { $0 } }
        set { stored.withLock { $0 = newValue } }
    }
}
