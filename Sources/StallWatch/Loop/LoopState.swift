// The loop's published progress (phase, sequence, phase start) and the watchdog's wake-up semaphore.
import CStallWatchCore
import Dispatch
import Synchronization

/// What a watchdog reads of a loop: which transition it is at, which phase, and since when.
package struct LoopSnapshot: Sendable, Equatable {
    /// Incremented on every activity transition.
    package var sequence: UInt64
    /// The last activity the loop reported (empty when not running).
    package var activity: LoopActivity
    /// CLOCK_MONOTONIC_COARSE nanoseconds when the current busy phase began (stale while idle).
    package var phaseStartNanos: UInt64

    package init(sequence: UInt64, activity: LoopActivity, phaseStartNanos: UInt64) {
        self.sequence = sequence
        self.activity = activity
        self.phaseStartNanos = phaseStartNanos
    }

    package var isBusy: Bool { activity.isBusy }
}

/// The words one loop publishes for its watchdog: written with plain atomic stores on every transition (no
/// syscall, no lock, no allocation), read seqlock-style by the watchdog.
///
/// The storage is a `sw_loop_state` that may live in ordinary memory or in a heartbeat segment shared with a
/// sidecar; either way the loop's cost per transition is the same.
public final class LoopState: @unchecked Sendable {
    // @unchecked Sendable: `ownStorage`'s words are touched only by C atomics; the rest is Mutex/Atomic.
    /// Replaced only while the loop is not running and before a watchdog thread starts (``adopt(_:)``), so the
    /// hot path reads it without a lock or an exclusivity check.
    @exclusivity(unchecked) private(set) var storage: UnsafeMutablePointer<sw_loop_state>
    private let ownsStorage: Bool
    private let ownStorage: UnsafeMutablePointer<sw_loop_state>
    /// Whether the loop is running, and the heartbeat segment that holds `storage` when one is published.
    private let runGuard = Mutex<(running: Bool, heartbeat: HeartbeatPublisher?)>((false, nil))
    /// Signalled by the loop on an idle → busy edge while the watchdog is parked, and when a followed stall ends.
    let wakeup = DispatchSemaphore(value: 0)
    /// At most one watchdog per loop.
    let watchdogAttached = Atomic<Bool>(false)
    /// The lead-up rings the loop writes into, nil while nobody records its lead-up (``LoopState+LeadUp.swift``).
    let leadUpPointer = Atomic<UnsafeMutablePointer<sw_leadup>?>(nil)
    /// The rings behind `leadUpPointer`, and any replaced ones, kept until this state goes: the loop may still be
    /// writing into a replaced one.
    let leadUpRings = Mutex<(current: LeadUpRing?, retired: [LeadUpRing])>((nil, []))

    /// Creates state in private memory.
    package init() {
        storage = .allocate(capacity: 1)
        storage.initialize(to: sw_loop_state())
        ownStorage = storage
        ownsStorage = true
    }

    /// Uses `storage` (e.g. inside a heartbeat segment); the caller keeps it alive longer than this object.
    init(storage: UnsafeMutablePointer<sw_loop_state>) {
        self.storage = storage
        ownStorage = storage
        ownsStorage = false
    }

    deinit {
        if ownsStorage { ownStorage.deallocate() }
    }

    // MARK: Heartbeat segment

    /// Moves the published words into `heartbeat`'s segment, so a sidecar reads exactly what a watchdog reads.
    ///
    /// Only while the loop is not running and no watchdog thread reads the old storage: the loop thread and
    /// the watchdog thread then see the new pointer through the lock taken in ``runStarted(threadID:)`` and the
    /// thread start. The segment stays mapped for as long as this state uses it.
    ///
    /// - Throws: `.invalidState` if the loop is running or (unless `watchdogStarting`) a watchdog is attached.
    func adopt(_ heartbeat: HeartbeatPublisher, watchdogStarting: Bool = false) throws(StallWatchError) {
        try runGuard.withLock {
            (guarded: inout (running: Bool, heartbeat: HeartbeatPublisher?)) throws(StallWatchError) in
            guard !guarded.running else {
                throw StallWatchError(
                    .invalidState, "the heartbeat can only be published before the loop runs (or between runs)")
            }
            guard watchdogStarting || !watchdogAttached.load(ordering: .acquiring) else {
                throw StallWatchError(.invalidState, "publish the heartbeat before starting the watchdog")
            }
            let target = heartbeat.statePointer
            target.pointee = storage.pointee
            storage = target
            guarded.heartbeat = heartbeat
        }
    }

    /// The heartbeat segment holding this state, if one was adopted.
    var heartbeat: HeartbeatPublisher? { runGuard.withLock { $0.heartbeat } }

    /// The loop begins running on thread `threadID`: freezes `storage` and publishes the thread id.
    func runStarted(threadID: Int32) {
        runGuard.withLock {
            $0.running = true
            $0.heartbeat?.publishThreadID(threadID)
        }
    }

    /// The loop returned from `run`.
    func runEnded() {
        runGuard.withLock {
            $0.running = false
            $0.heartbeat?.publishThreadID(0)
        }
    }

    /// Publishes a transition. Runs on the loop thread.
    ///
    /// - Parameters:
    ///   - busyEdge: The loop leaves its idle wait or starts running.
    ///   - timeMoved: Code ran or the loop slept since the last recorded phase start, so the clock must be read;
    ///     otherwise the new phase began at that same instant.
    /// - Warning: Called on the loop thread for every transition; keep it allocation- and syscall-free.
    @inline(__always)
    func record(_ activity: LoopActivity, sequence: UInt64, busyEdge: Bool, timeMoved: Bool = true) {
        let flags = sw_loop_state_record(
            storage, sequence, activity.phaseCode, busyEdge ? 1 : 0, timeMoved || busyEdge ? 1 : 0)
        if flags != 0 { recordSlowPath(flags) }
    }

    /// `record` for benchmarks outside the module.
    package func benchmarkRecord(_ activity: LoopActivity, sequence: UInt64, timeMoved: Bool) {
        record(activity, sequence: sequence, busyEdge: false, timeMoved: timeMoved)
    }

    @inline(never)
    private func recordSlowPath(_ flags: Int32) {
        var wake = flags & Int32(SW_RECORD_WAKE_WATCHDOG) != 0
        if flags & Int32(SW_RECORD_STALL_FOLLOWED) != 0, sw_loop_state_mark_stall_end(storage) != 0 {
            wake = true
        }
        if wake || flags & Int32(SW_RECORD_SIGNAL_EVERY) != 0 { wakeup.signal() }
    }

    /// Set while a watchdog using the classic strategy is attached: every transition signals `wakeup`.
    func signalEveryTransition(_ on: Bool) { sw_loop_state_signal_every(storage, on ? 1 : 0) }

    /// A consistent snapshot of the published words.
    package func snapshot() -> LoopSnapshot {
        var word: UInt64 = 0
        var start: UInt64 = 0
        sw_loop_state_read(storage, &word, &start)
        return LoopSnapshot(
            sequence: word >> 8, activity: LoopActivity(phaseCode: UInt32(word & 0xff)), phaseStartNanos: start)
    }
}
