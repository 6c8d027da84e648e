// What a watchdog needs of a loop, so one detector and one report path serve every kind of loop.
import Synchronization

/// A loop a ``Watchdog`` can watch: the StallWatch ``EventLoop``, a Foundation `RunLoop` through
/// ``FoundationRunLoopMonitor``, or the Dispatch main queue through ``MainQueueProbe``.
///
/// The loop publishes its transitions into ``state`` (lock-free stores, see ``LoopState``); the watchdog reads
/// snapshots of it, samples ``sampledThread`` during a stall and copies ``annotations`` into the report.
public protocol WatchedLoop: AnyObject, Sendable {
    /// Appears in reports (`loop.name`) and metrics labels. A loop that keeps the default name
    /// (``StallWatchConfiguration/defaultLoopName``) is named by the watchdog's `loopName` setting in reports,
    /// events and the heartbeat (``StallWatchConfiguration/name(of:)``).
    var name: String { get }
    /// The published progress a watchdog reads.
    var state: LoopState { get }
    /// The thread to sample during a stall, with its stack bounds; nil while unknown (not running yet).
    var sampledThread: SampledThread? { get }
    /// Key/values in force now, copied into the report of a stall.
    var annotations: [String: String] { get }
    /// Completed loop iterations (pings answered, for a probe), or nil when the loop does not count them.
    var iterations: UInt64? { get }
}

extension EventLoop: WatchedLoop {}

extension StallWatchConfiguration {
    /// The name a watchdog with these settings gives `loop` in reports, events and its heartbeat segment:
    /// `loopName` when the loop kept the default name, else the loop's own name.
    public func name(of loop: any WatchedLoop) -> String {
        loop.name == Self.defaultLoopName ? loopName : loop.name
    }
}

/// Key/values attached to the work a loop is doing now; shared by the loop adapters. Safe from any thread.
final class LoopAnnotations: Sendable {
    private let store = Mutex<[String: String]>([:])

    func set(_ key: String, _ value: String) { store.withLock { $0[key] = value } }
    func removeAll() { store.withLock { $0.removeAll() } }
    var values: [String: String] { store.withLock { $0 } }
}
