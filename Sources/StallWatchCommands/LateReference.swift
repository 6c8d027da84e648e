// LateReference: an object for its own event handler, which is created before the object is.
import Synchronization

/// Holds a ``SidecarDaemon`` or ``ThreadGroupWatcher`` once it exists, so that its event handler can ask it about
/// what an event is about (a thread's loop name, a process's executable, for metrics labels).
final class LateReference<Object: AnyObject & Sendable>: Sendable {
    private let stored = Mutex<Object?>(nil)

    var object: Object? {
        get { stored.withLock { $0 } }
        set { stored.withLock { $0 = newValue } }
    }
}
