// TickedLoop: a loop of the service's own that tells StallWatch its phases with two calls per iteration.
import CStallWatchCore
import Synchronization

/// Makes any loop watchable by a ``Watchdog`` with exact phases: the loop calls ``willRunWork()`` when it
/// leaves its wait to run work and ``willWait()`` just before it waits again. Between the two the loop is busy;
/// a busy phase longer than the threshold is a stall, with the same detector, samples and reports as the
/// StallWatch ``EventLoop``.
///
/// ```swift
/// let ticks = TickedLoop(name: "io-loop")
/// let watchdog = Watchdog(loop: ticks, configuration: try .load())
/// try watchdog.start()
/// while running {
///     ticks.willWait()
///     let events = poller.wait()
///     ticks.willRunWork()
///     handle(events)
/// }
/// ticks.finish()
/// ```
///
/// Each call is one or two atomic stores and, for ``willRunWork()``, one coarse clock read (a vDSO read, no
/// system call); nothing is allocated. The only exception is the watchdog's own wake-up: on the idle → busy
/// edge, when the watchdog is parked because the loop was idle, ``willRunWork()`` signals it once (the same
/// cost the built-in loops pay). The first call learns the calling thread (once, with a lock).
///
/// With the watchdog's `leadUp` on, each turn (``willRunWork()`` to ``willWait()``) is also one lead-up item: two
/// precise clock reads and a few relaxed stores more, labelled by the annotations set while it ran, else those in
/// force as it began, else "turn".
///
/// Start the watchdog before the first tick so it can publish the heartbeat segment (a watchdog started later
/// still detects; only the heartbeat is refused, see ``Watchdog/heartbeatError``). The thread's signal mask is
/// left as it is: samples come from the non-interrupting capture, or, where ptrace is refused, from the
/// sampling signal only if the thread does not block it.
///
/// - Warning: The tick calls are for one loop thread, the one that runs the loop: they keep the loop's
///   sequence without synchronisation. Calls from another thread corrupt the phases, not memory.
public final class TickedLoop: WatchedLoop, SampledLoop, @unchecked Sendable {
    // @unchecked Sendable: `sequence`, `runs` and `threadKnown` are touched by the loop thread only (see the Warning).
    public let name: String
    public let state = LoopState()
    private let thread = Mutex<SampledThread?>(nil)
    private let iterationCount = Atomic<UInt64>(0)
    private let annotationStore = LoopAnnotations()
    private var sequence: UInt64 = 0
    private var runs: UInt64 = 0
    private var threadKnown = false
    /// The turn being timed for the lead-up (between ``willRunWork()`` and ``willWait()``), and the annotations'
    /// mark at its start.
    private var turn = LeadUpItemTimer()
    private var turnMark: UInt64 = 0
    private static let turnLabel = LeadUpLabels.shared.id(for: "turn")

    /// - Parameter name: Appears in reports (`loop.name`), events and metrics.
    public init(name: String = StallWatchConfiguration.defaultLoopName) {
        self.name = name
    }

    /// The loop leaves its wait (or starts) and is about to run work: a busy phase begins.
    ///
    /// - Warning: Runs on the loop thread for every iteration; allocation- and syscall-free.
    public func willRunWork() {
        if !threadKnown { learnThread() }
        sequence &+= 1
        runs &+= 1
        iterationCount.store(runs, ordering: .relaxed)
        state.record(.afterWaiting, sequence: sequence, busyEdge: true, timeMoved: true)
        endTurn()
        turn = LeadUpItemTimer(state)
        if turn.isOn {
            turnMark = annotationStore.mark
            let inForce = annotationStore.label(since: turnMark, explicit: 0)
            turn.begin(at: sw_monotonic_ns(), label: inForce != 0 ? inForce : Self.turnLabel)
        }
    }

    /// The loop is about to wait for work: it is idle until the next ``willRunWork()``, however long it waits.
    ///
    /// - Warning: Runs on the loop thread for every iteration; allocation- and syscall-free.
    public func willWait() {
        if !threadKnown { learnThread() }
        sequence &+= 1
        state.record(.beforeWaiting, sequence: sequence, busyEdge: false, timeMoved: false)
        endTurn()
    }

    /// The loop has stopped turning (its thread may exit): not busy, not waiting. Call it on the loop thread;
    /// the next ``willRunWork()`` or ``willWait()`` starts it again, on whichever thread calls it.
    public func finish() {
        guard threadKnown else { return }
        sequence &+= 1
        state.record(.exit, sequence: sequence, busyEdge: false, timeMoved: false)
        endTurn()
        state.runEnded()
        thread.withLock { $0 = nil }
        threadKnown = false
    }

    package var sampledThread: SampledThread? { thread.withLock { $0 } }

    /// Times the loop ran work (``willRunWork()`` calls) since it was created.
    package var iterations: UInt64? { iterationCount.load(ordering: .relaxed) }

    /// Attaches key/values to the work the loop is doing now; they appear in the report of a stall that
    /// happens before ``clearAnnotations()``. Safe from any thread.
    public func annotate(_ key: String, _ value: String) { annotationStore.set(key, value) }

    /// Removes the annotations set with ``annotate(_:_:)``.
    public func clearAnnotations() { annotationStore.removeAll() }

    package var annotations: [String: String] { annotationStore.values }

    /// Each turn is one lead-up item.
    var timesItems: Bool { true }

    /// Ends the turn timed for the lead-up, if one is: labelled by the annotations set while it ran, else those in
    /// force, else "turn".
    @inline(__always)
    private func endTurn() {
        guard turn.isOn else { return }
        let set = annotationStore.label(since: turnMark, explicit: 0)
        turn.end(at: sw_monotonic_ns(), label: set != 0 ? set : Self.turnLabel, delay: 0)
        turn = LeadUpItemTimer()
    }

    @inline(never)
    private func learnThread() {
        let me = SampledThread.current()
        thread.withLock { $0 = me }
        state.runStarted(threadID: me.threadID)
        threadKnown = true
    }
}
