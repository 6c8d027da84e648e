// What a watchdog needs of a loop, so one detector and one report path serve every kind of loop.
import Synchronization

/// A loop a ``Watchdog`` can watch: the StallWatch ``EventLoop``, a Foundation `RunLoop` through
/// ``FoundationRunLoopMonitor``, the Dispatch main queue through ``MainQueueProbe``, or a loop of the service's
/// own through ``TickedLoop``.
///
/// The loop publishes its transitions into ``state`` (lock-free stores, see ``LoopState``), which only StallWatch
/// reads. A `LoopState` cannot be made outside StallWatch, so these four are the loops there are.
public protocol WatchedLoop: AnyObject, Sendable {
    /// Appears in reports (`loop.name`) and metrics labels. A loop that keeps the default name
    /// (``StallWatchConfiguration/defaultLoopName``) is named by the watchdog's `loopName` setting in reports,
    /// events and the heartbeat.
    var name: String { get }
    /// The published progress a watchdog reads.
    var state: LoopState { get }
}

/// What a watchdog reads of StallWatch's own loops beyond ``WatchedLoop``: the thread to sample during a stall,
/// the annotations to copy into its report, and the iterations metrics count. Every loop of StallWatch conforms.
protocol SampledLoop: WatchedLoop {
    /// The thread to sample during a stall, with its stack bounds; nil while unknown (not running yet).
    var sampledThread: SampledThread? { get }
    /// Key/values in force now, copied into the report of a stall.
    var annotations: [String: String] { get }
    /// Completed loop iterations (pings answered, for a probe), or nil when the loop does not count them.
    var iterations: UInt64? { get }
    /// See ``ProgressSource/unsampledReason``.
    var unsampledReason: String? { get }
    /// See ``ProgressSource/threadThatTookUp(busyPhase:)``.
    func threadThatTookUp(busyPhase sequence: UInt64) -> (
        threadID: Int32, scheduleAtStart: ThreadSchedule?
    )?
    /// Whether the loop times its items into the lead-up rings its state points at (``LoopState/startLeadUp(_:)``):
    /// a loop that does not would leave them empty, which reads as an idle loop.
    var timesItems: Bool { get }
}

extension SampledLoop {
    /// A loop times no items unless it says so.
    var timesItems: Bool { false }
    /// A loop run by a thread of its own always has one to sample.
    var unsampledReason: String? { nil }
    func threadThatTookUp(busyPhase sequence: UInt64) -> (
        threadID: Int32, scheduleAtStart: ThreadSchedule?
    )? {
        nil
    }
}

extension WatchedLoop {
    /// This loop's thread, annotations and iterations, which every loop of StallWatch has.
    var sampled: (any SampledLoop)? { self as? any SampledLoop }
}

extension EventLoop: SampledLoop {
    /// Every block, timer, source and main-queue drain is one item.
    var timesItems: Bool { true }
}

extension StallWatchConfiguration {
    /// The name a watchdog with these settings gives `loop` in reports, events and its heartbeat segment:
    /// `loopName` when the loop kept the default name, else the loop's own name.
    package func name(of loop: any WatchedLoop) -> String {
        loop.name == Self.defaultLoopName ? loopName : loop.name
    }
}

/// Key/values attached to the work a loop is doing now; shared by the loops and adapters. Safe from any thread.
///
/// Each change also registers the annotations as a lead-up label (``LeadUpLabels``), so the loop's per-item path
/// reads a label id (two relaxed loads) instead of the dictionary.
final class LoopAnnotations: Sendable {
    private let store = Mutex<[String: String]>([:])
    /// The label of the annotations in force (0: none).
    private let inForce = Atomic<UInt32>(0)
    /// The label of the last ``set(_:_:)``, kept through ``removeAll()``.
    private let lastSet = Atomic<UInt32>(0)
    /// Bumped by every ``set(_:_:)``: an item that saw it move was annotated while it ran.
    private let changes = Atomic<UInt64>(0)

    func set(_ key: String, _ value: String) {
        store.withLock {
            $0[key] = value
            let label = LeadUpLabels.shared.id(for: LeadUpLabels.annotationLabel($0))
            inForce.store(label, ordering: .relaxed)
            lastSet.store(label, ordering: .relaxed)
            changes.add(1, ordering: .releasing)
        }
    }

    func removeAll() {
        store.withLock {
            $0.removeAll()
            inForce.store(0, ordering: .relaxed)
        }
    }

    var values: [String: String] { store.withLock { $0 } }

    /// A mark to take when an item begins, for ``label(since:explicit:)``.
    @inline(__always)
    var mark: UInt64 { changes.load(ordering: .acquiring) }

    /// An item's label when it ends: the annotations set while it ran (the most specific), else its own label
    /// (`explicit`: a `perform` label, a timer's or source's name), else the annotations in force.
    @inline(__always)
    func label(since mark: UInt64, explicit: UInt32) -> UInt32 {
        if changes.load(ordering: .acquiring) != mark { return lastSet.load(ordering: .relaxed) }
        return explicit != 0 ? explicit : inForce.load(ordering: .relaxed)
    }
}
