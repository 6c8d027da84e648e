// ProcProgressProbe's moment rule: one short sleep inside a followed stall's work, with nothing else to show for a
// turn, is held until the next look says whether the loop went on turning.
import CStallWatchCore

extension ProcProgressProbe {
    /// A look that saw the thread do nothing but sleep once, briefly, while a stall is followed: when it was seen, and
    /// how long the thread slept in the interval before it.
    struct HeldMoment: Sendable, Equatable {
        var at: UInt64
        var sleptNanos: UInt64
    }

    /// The longest sleep the rule holds: a loop that waited that long for its next event was idle for it. A sleep of
    /// 100 µs was seen to last 1.2 ms on this kind of virtual machine (its CPU woken by the host), hence 5 ms.
    static let momentMaxSleepNanos: UInt64 = 5_000_000

    /// Whether the thread made progress at this look, given that the rules said `progress`, under the moment rule.
    ///
    /// A CPU-bound piece of work can sleep for an instant without turning the loop — a compiler thread's lock taken
    /// for a moment, a page fault served from another thread's I/O — and /proc counts that sleep like the one a
    /// loop's turn makes in its idle wait. While a stall is followed, a look that saw exactly that (the thread in
    /// user space at both looks, one voluntary switch beyond what captures explain, no read or write completed,
    /// under 5 ms asleep by its `schedstat`) is held: not progress yet. The next look settles it. A turn
    /// there (any progress, another moment included) says the loop went on turning: the stall ended at the held
    /// look. No progress at all says the sleep was inside the work: one stall goes on, and its report says so
    /// ("likely"): a loop whose idle wait found its next event at once and whose next item was as long would read
    /// the same. A loop that comes back to its idle wait ends the stall there, as always.
    mutating func judgedUnderMomentRule(
        _ progress: Bool, from before: ThreadWait?, to after: ThreadWait?, moves: CounterMoves?,
        _ directory: ProcDirectory, now: UInt64
    ) -> Bool {
        // Dated by a clock read right after the file, not by the look's start: a look kept from a CPU on its way
        // would otherwise count its own delay as the thread's sleep.
        var schedule = followingStall ? directory.schedstat(now: now) : nil
        schedule?.monotonicNanos = sw_monotonic_ns()
        let previous = busySchedule
        busySchedule = schedule
        if let held = heldMoment {
            heldMoment = nil
            if progress {
                if idleSeenAt == nil { idleSeenAt = held.at }
                endedBy =
                    "ended at a look that saw the thread sleep \(held.sleptNanos / 1000) µs once and nothing else; "
                    + "the loop went on turning after it, so that sleep was its turn"
                    + (endedBy.map { " (the look after: \($0))" } ?? "")
                return true
            }
            momentsInside.append(held.sleptNanos)
            return false
        }
        guard progress, followingStall, let moves, !moves.inconsistent, moves.switches == 1, !moves.madeCalls,
            !(before?.inSyscall ?? true), !(after?.inSyscall ?? true), let schedule, let previous,
            schedule.monotonicNanos > previous.monotonicNanos
        else { return progress }
        let wall: UInt64 = schedule.monotonicNanos - previous.monotonicNanos
        let ran: UInt64 =
            (schedule.cpuNanos &- previous.cpuNanos) &+ (schedule.runQueueWaitNanos &- previous.runQueueWaitNanos)
        let slept: UInt64 = wall > ran ? wall - ran : 0
        guard slept < Self.momentMaxSleepNanos else { return progress }
        heldMoment = HeldMoment(at: now, sleptNanos: slept)
        endedBy = nil
        return false
    }

    /// What the followed stall's report says of the moments held inside it, when it ends; nil when there were none.
    var momentsInsideNote: String? {
        guard !momentsInside.isEmpty else { return nil }
        let sleeps = momentsInside.map { "\($0 / 1000) µs" }.joined(separator: ", ")
        return
            "likely one stall: \(momentsInside.count) moment(s) the thread slept once and did nothing else (\(sleeps)), "
            + "then went on without turning, were taken as part of the work (a loop that found its next event at "
            + "once and ran an item as long would read the same)"
    }
}
