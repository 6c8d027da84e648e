// SignalForwarder: `run`'s rule for passing a signal on to its child — only when the child does not have it already.
import CStallWatchCore
import StallWatch
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Decides, for each signal `stallwatch run` receives, whether its child received it too (sent to the whole process
/// group or cgroup, which the child shares) or only `run` did, and forwarding alone delivers it.
///
/// A handler learns the signal's number and sender from the kernel (`si_code`, `si_pid`, `si_uid`), never whether it
/// was sent to the process or to its group: `kill(pid, …)` and `kill(-pgid, …)` read the same. So `run` keeps a
/// witness (``SignalWitness``) in its process group and cgroup, and a signal reached the child already when it
/// reached the witness too, which is when:
/// - the witness had the same signal pending when `run`'s handler ran (the handler reads the witness's pending
///   mask; a signal sent to a group reaches every member at once), or
/// - the witness reported the same signal from the same sender (same `si_code`, `si_pid` and `si_uid`), before or
///   within ``graceNanos`` (100 ms) after it: a sender that signals every process of a cgroup one by one (systemd's
///   `KillMode=control-group`) may reach the witness a moment after `run`;
///
/// and the child is still in `run`'s process group and cgroup, where such a signal reaches it too. Such signals
/// were sent to the group (`kill -- -PGID`, `timeout`, a terminal's ^C, ^Z or hangup, the child's own `kill(0, …)`)
/// or to every process of the cgroup. Every other signal is forwarded, once.
///
/// Standard signals do not queue: several sent before a process takes them are one. The pending mask covers the
/// case where the witness takes two as one and `run` takes them apart; a report the witness sent that no signal of
/// `run`'s took is kept ``keepNanos`` (500 ms). Two blind spots follow, both needing the same signal twice within
/// moments: a signal sent to `run` alone while the witness still has the same signal pending from a group-wide
/// sending, or from the same sender within 500 ms of a group-wide one the witness took as one with another, is
/// taken for group-wide and not forwarded. Without a witness (it could not be forked) only a signal the kernel
/// sent (a terminal's) counts as received by a child in `run`'s process group.
final class SignalForwarder: Sendable {
    /// How long a signal sent to `run` waits for the witness to receive it too.
    static let graceNanos: UInt64 = 100_000_000
    /// How long a signal the witness has pending may take to be reported.
    static let pendingNanos: UInt64 = 2_000_000_000
    /// How long a report of the witness that matched no signal of `run`'s is kept (a signal sent to the witness
    /// alone, one `run` judged by the pending mask, or a second group signal that `run` received as one).
    static let keepNanos: UInt64 = 500_000_000

    let childPID: Int32
    private let witness: SignalWitness?
    private let unmatched = Mutex<[(delivery: SignalRelay.Delivery, at: UInt64)]>([])

    init(childPID: Int32, witness: SignalWitness?) {
        self.childPID = childPID
        self.witness = witness
    }

    /// Whether the child received `delivery` too (then it must not be forwarded). Called on the relay thread; may
    /// wait up to ``graceNanos`` (or a pending signal's report).
    func childHasAlready(_ delivery: SignalRelay.Delivery) -> Bool {
        guard let witness else { return delivery.fromKernel && childSharesProcessGroup }
        guard childSharesProcessGroup, childSharesCgroup else { return false }
        if take(delivery, adding: [], now: sw_monotonic_ns()) || delivery.witnessHadItPending { return true }
        let start = sw_monotonic_ns()
        var now = start
        // Pending at the witness: received, about to be reported (a moment more for the report to be written).
        var pendingSeenAt: UInt64?
        while true {
            let deadline = min(
                max(start + Self.graceNanos, (pendingSeenAt ?? 0) + 20_000_000), start + Self.pendingNanos)
            if now >= deadline { return false }
            let arrived = witness.reports(waitingUntil: min(deadline, now + 5_000_000))
            now = sw_monotonic_ns()
            if take(delivery, adding: arrived, now: now) { return true }
            if witness.hasPending(delivery.signal) { pendingSeenAt = now }
        }
    }

    /// Adds `arrived` (reported at `now`) to the unmatched reports, drops those kept too long, and removes the one
    /// that matches `delivery`; true when there was one.
    func take(_ delivery: SignalRelay.Delivery, adding arrived: [SignalRelay.Delivery], now: UInt64) -> Bool {
        unmatched.withLock { list in
            list.append(contentsOf: arrived.map { ($0, now) })
            list.removeAll { now - $0.at > Self.keepNanos }
            guard let index = list.firstIndex(where: { $0.delivery.sameSending(as: delivery) }) else { return false }
            list.remove(at: index)
            return true
        }
    }

    /// The child is in `run`'s process group now.
    var childSharesProcessGroup: Bool {
        let group = getpgid(childPID)
        return group >= 0 && group == getpgrp()
    }

    /// The child is in `run`'s cgroup now (the same line for every hierarchy of /proc/PID/cgroup).
    var childSharesCgroup: Bool {
        guard let ours = ProcDirectory.current.text("cgroup"),
            let its = ProcDirectory(processID: childPID).text("cgroup")
        else { return false }
        return ours == its
    }

    /// Ends the witness.
    func stop() { witness?.stop() }
}
