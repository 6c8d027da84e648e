// Off-loop recomputation: a burst of change signals becomes one computation in the background, delivered on the loop.
import Dispatch
import Synchronization

/// Combines change signals from anywhere, recomputes a value off the loop, and delivers it on the loop — one
/// computation per burst of changes, however large the burst.
///
/// The field's "combine several signals, compute in the background, deliver on the main loop": a sorted and
/// filtered session list that must follow every new message, a search index that must follow every edit. Doing
/// the computation on the loop for every change is the classic stall; doing it in the background for every
/// change wastes the machine and delivers stale results late. Here at most one computation runs at a time; the
/// changes signalled while it runs are collected and handed together to the next one.
///
/// ```swift
/// let sortedSessions = BackgroundRecomputer<String, [Session]>(scheduler: loop) { changedIDs in
///     store.snapshot.sorted(by: Session.displayOrder)          // on a background queue
/// } deliver: { sorted in
///     model.sessions = sorted                                   // on the loop
/// }
/// sortedSessions.signal(sessionID)                              // any thread, any number of times
/// ```
public final class BackgroundRecomputer<Change: Hashable & Sendable, Value: Sendable>: Sendable {
    private struct State {
        var dirty = false
        var changes: Set<Change> = []
        var computing = false
        var signals = 0
        var computations = 0
        var deliveries = 0
    }

    private let scheduler: any LoopScheduler
    private let queue: DispatchQueue
    private let compute: @Sendable (Set<Change>) -> Value
    private let deliver: @Sendable (Value) -> Void
    private let state = Mutex(State())

    /// - Parameters:
    ///   - scheduler: The loop that receives the results.
    ///   - queue: Where computations run (one at a time); a new utility-QoS serial queue by default.
    ///   - compute: Computes the value off the loop from the changes collected since the last computation (empty
    ///     after a bare ``signal()``). It must not touch loop-confined state: read a snapshot.
    ///   - deliver: Receives each result on the loop thread, in the order computed.
    public init(
        scheduler: any LoopScheduler,
        queue: DispatchQueue = DispatchQueue(label: "stallwatch.remedies.recompute", qos: .utility),
        compute: @escaping @Sendable (Set<Change>) -> Value,
        deliver: @escaping @Sendable (Value) -> Void
    ) {
        self.scheduler = scheduler
        self.queue = queue
        self.compute = compute
        self.deliver = deliver
    }

    /// Signals that `change` happened: a computation will follow (coalesced with others). Safe from any thread.
    public func signal(_ change: Change) {
        signal { $0.changes.insert(change) }
    }

    /// Signals that something changed, without saying what. Safe from any thread.
    public func signal() {
        signal { _ in }
    }

    /// Signals received so far.
    var signalCount: Int { state.withLock { $0.signals } }

    /// Computations started so far (at most one per burst of signals).
    package var computationCount: Int { state.withLock { $0.computations } }

    /// Results delivered on the loop so far.
    var deliveryCount: Int { state.withLock { $0.deliveries } }

    /// True while a computation runs or signals wait for one.
    public var isBusy: Bool { state.withLock { $0.computing || $0.dirty } }

    private func signal(_ record: (inout State) -> Void) {
        let start = state.withLock { state -> Bool in
            record(&state)
            state.signals += 1
            state.dirty = true
            guard !state.computing else { return false }
            state.computing = true
            return true
        }
        if start { queue.async { [self] in computeLoop() } }
    }

    /// Runs on `queue`: computes while there are signals, handing each result to the loop.
    private func computeLoop() {
        while true {
            let changes = state.withLock { state -> Set<Change>? in
                guard state.dirty else {
                    state.computing = false
                    return nil
                }
                state.dirty = false
                state.computations += 1
                defer { state.changes.removeAll() }
                return state.changes
            }
            guard let changes else { return }
            let value = compute(changes)
            scheduler.enqueue { [self] in
                deliver(value)
                state.withLock { $0.deliveries += 1 }
            }
        }
    }
}
