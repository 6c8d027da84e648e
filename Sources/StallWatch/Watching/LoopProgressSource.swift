// LoopProgressSource: the in-process loop's own state words, waited on with a semaphore and a deadline.
import CStallWatchCore
import Dispatch

/// Progress of a loop in this process, read from its ``LoopState`` (lock-free loads), for the ``Watchdog``.
///
/// The wait is what keeps the watchdog free at rest: parked on the loop's semaphore with no timeout while the
/// loop is idle (the loop signals once on its idle → busy edge), otherwise a timed wait until the detector's
/// deadline or the next sample. While a stall is followed the loop is asked to record the precise moment it
/// moves on (the follow flag).
struct LoopProgressSource: ProgressSource {
    let loop: any WatchedLoop
    private let state: LoopState
    /// The loop's thread and annotations (every loop of StallWatch has them).
    private let details: (any SampledLoop)?
    /// True once the watchdog is asked to stop; a park must not begin then.
    private let isStopping: () -> Bool
    /// The loop's lead-up, ticked between waits (nil when not recorded).
    private let leadUp: LeadUpRecorder?
    /// Called on every wake-up of the watcher, before it looks at the loop (a snapshot request from outside is
    /// noticed there): it must be quick.
    var onWake: (() -> Void)?

    init(loop: any WatchedLoop, leadUp: LeadUpRecorder? = nil, isStopping: @escaping () -> Bool) {
        self.loop = loop
        self.state = loop.state
        self.details = loop.sampled
        self.leadUp = leadUp
        self.isStopping = isStopping
    }

    var sampledThread: SampledThread? { details?.sampledThread }
    var annotations: [String: String] { details?.annotations ?? [:] }
    var unsampledReason: String? { details?.unsampledReason }
    func threadThatTookUp(busyPhase sequence: UInt64) -> (
        threadID: Int32, scheduleAtStart: ThreadSchedule?
    )? {
        details?.threadThatTookUp(busyPhase: sequence)
    }
    /// Reads are two atomic loads: look again at once rather than sleep through the stall's end.
    var looksAgainAtOnce: Bool { true }

    /// The lead-up's last reading of the loop thread when it was taken in the current phase (the watcher reads the
    /// thread as it wakes for the loop's idle → busy edge, once a bucket has passed since the last reading): a
    /// stall then has CPU and run-queue figures from about its start — a stall that ends before its first sample
    /// still has them. A reading from before the phase began is not used: it would count other work.
    var phaseStartSchedule: ThreadSchedule? {
        guard let leadUp, let threadID = sampledThread?.threadID,
            let reading = leadUp.lastSchedule(of: threadID),
            reading.monotonicNanos >= state.snapshot().phaseStartNanos
        else { return nil }
        return reading
    }

    /// Two atomic loads: the loop has made no transition since the stall's.
    func isStillStuck(after sequence: UInt64) -> Bool { state.snapshot().sequence == sequence }

    func read(now: UInt64) -> ProgressReading {
        .progress(state.snapshot(), stallEndNanos: sw_loop_state_stall_end(state.storage))
    }

    func stallBegan() { sw_loop_state_follow(state.storage, 1) }
    func stallEnded() { sw_loop_state_follow(state.storage, 0) }

    func wait(for wait: StallDetector.Wait, nextSampleAt: UInt64?) -> Bool {
        onWake?()
        let deadline = wait.deadline(nextSampleAt: nextSampleAt)
        guard let leadUp else { return sleep(until: deadline) }
        // The lead-up's ticks come between the detector's looks: a tick's deadline that passes is not the
        // detector's timeout (the classic strategy counts those), so the wait goes on to the detector's deadline.
        // Without a deadline the detector would park until the loop moves; a tick's timed sleep is not a park (the
        // loop does not signal it), so a move seen after a tick is that wake-up.
        let entered = state.snapshot().sequence
        while true {
            let snapshot = state.snapshot()
            // A park is asked for when the detector last saw the loop idle. If the loop is busy now it moved since
            // (perhaps before `entered` was read, so the sequence shows no move): the detector must look again,
            // or a stall that began in that window would go unseen until it ended.
            if deadline == nil && snapshot.isBusy { return false }
            let tick = leadUp.tick(
                now: sw_monotonic_ns(), threadID: sampledThread?.threadID, sequence: snapshot.sequence,
                isBusy: snapshot.isBusy, lookDue: deadline)
            guard let tick, deadline.map({ tick < $0 }) ?? true else { return sleep(until: deadline) }
            if !sleep(until: tick) { return false }
            if isStopping() { return false }
            onWake?()
            if deadline == nil && state.snapshot().sequence != entered { return false }
        }
    }

    /// Sleeps until `deadline` (or parks when nil). Returns true if the wait timed out.
    private func sleep(until deadline: UInt64?) -> Bool {
        guard let deadline else {
            let word = sw_loop_state_park(state.storage)
            if LoopActivity(phaseCode: UInt32(word & 0xff)).isBusy || isStopping() {
                // Became busy (or stopping) while parking: withdraw; if the loop already took the flag, its
                // signal is on the way and is consumed here.
                if sw_loop_state_unpark(state.storage) == 0 { state.wakeup.wait() }
                return false
            }
            state.wakeup.wait()
            _ = sw_loop_state_unpark(state.storage)
            return false
        }
        let now = sw_monotonic_ns()
        guard deadline > now else { return true }
        return state.wakeup.wait(timeout: .now() + .nanoseconds(Int(deadline - now))) == .timedOut
    }
}
