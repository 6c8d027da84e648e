// The /proc probe's moment rule: a short sleep inside a followed stall's CPU-bound work, with nothing else done, is
// held until the next look says whether the loop went on turning.
import CStallWatchCore
import Foundation
import StallWatchTestSupport
import Synchronization
import Testing

@testable import StallWatch

#if canImport(Glibc)
    import Glibc
#endif

@Suite(.offPool, .serialized) struct ProcProbeMomentTests {
    /// A thread of this process that idles in `poll` on a pipe (``PollPipeLoop``). For each byte it spins until the
    /// test moves `phase` to 1, sleeps 100 µs once and spins until `phase` is 2; then, for byte 2 only, turns ten
    /// times (a 200 µs sleep and 1 ms of CPU each); it spins until `phase` is 3 and goes back to its `poll`. `mark`
    /// says where it is (1: busy, 2: the moment slept, 3: past the turns, 0: on its way back to `poll`).
    final class MomentLoop: PollPipeLoop, @unchecked Sendable {  // Atomics only.
        let phase = Atomic<Int>(0)
        let mark = Atomic<Int>(0)
        /// The 100 µs sleep was one voluntary switch (the thread's own count): preempted on its way into the sleep
        /// until its timer had fired, a thread never sleeps, and there is no moment to see.
        let sleptOnce = Atomic<Bool>(false)

        /// The calling thread's voluntary context switches so far (`getrusage(RUSAGE_THREAD)`).
        static func ownVoluntarySwitches() -> Int {
            var usage = rusage()
            return getrusage(__rusage_who_t(1), &usage) == 0 ? usage.ru_nvcsw : -1
        }

        override func work(_ byte: UInt8) {
            mark.store(1, ordering: .releasing)
            while phase.load(ordering: .acquiring) == 0 {}
            let before = Self.ownVoluntarySwitches()
            usleep(100)
            sleptOnce.store(before >= 0 && Self.ownVoluntarySwitches() == before + 1, ordering: .releasing)
            mark.store(2, ordering: .releasing)
            while phase.load(ordering: .acquiring) == 1 {}
            if byte == 2 {
                for _ in 0..<10 {
                    usleep(200)
                    let end = sw_monotonic_ns() + 1_000_000
                    while sw_monotonic_ns() < end {}
                }
            }
            mark.store(3, ordering: .releasing)
            while phase.load(ordering: .acquiring) == 2 {}
            mark.store(0, ordering: .releasing)
        }

        /// Moves the thread on to `phase` and waits until it marks `mark`.
        func advance(to phase: Int, until mark: Int) {
            self.phase.store(phase, ordering: .releasing)
            #expect(pollUntil { self.mark.load(ordering: .acquiring) == mark })
        }

        override func stop() {
            phase.store(3, ordering: .releasing)
            super.stop()
        }
    }

    /// What one attempt saw: the sequence at the followed stall's start, at the held look and at the look after;
    /// the held look's time and the stall end the look after gave; the note at the stall's end; whether another
    /// watcher of this process captured the thread meanwhile (its stop would count as a sleep: no case of the rule).
    struct Attempt {
        var followed: UInt64 = 0
        var held: UInt64 = 0
        var after: UInt64 = 0
        var heldAt: UInt64 = 0
        var stallEnd: UInt64 = 0
        var endNote: String?
        var captured = false
        /// The thread's sleep was one voluntary switch (``MomentLoop/sleptOnce``): the case's premise.
        var sleptOnce = false

        /// Why the attempt is no case of the rule; nil when it is one.
        var unclean: String? {
            if captured { return "another watcher captured the thread" }
            return sleptOnce ? nil : "its 100 µs sleep was no voluntary switch (preempted until its timer fired)"
        }
    }

    /// One pass of `byte` through `loop`, watched by a probe that follows a stall from the thread's first busy look.
    static func attempt(_ loop: MomentLoop, byte: UInt8) -> Attempt {
        let pid = getpid()
        #expect(
            pollUntil {
                let tid = loop.threadID.load(ordering: .acquiring)
                return tid != 0 && ProcDirectory(processID: pid, threadID: tid).syscall()?.number == 7
            })
        let tid = loop.threadID.load(ordering: .acquiring)
        let capturesBefore = CaptureLedger.finishedCaptures(processID: pid, threadID: tid)
        var probe = ProcProgressProbe(processID: pid, threadID: tid, now: sw_monotonic_ns())
        for _ in 0..<3 {
            #expect(probe.observe(now: sw_monotonic_ns())?.isBusy == false)
            usleep(20_000)
        }
        var seen = Attempt()
        loop.phase.store(0, ordering: .releasing)
        loop.send(byte)
        #expect(pollUntil { loop.mark.load(ordering: .acquiring) == 1 })
        usleep(20_000)
        #expect(probe.observe(now: sw_monotonic_ns())?.isBusy == true)
        probe.stallBegan()
        usleep(20_000)
        seen.followed = probe.observe(now: sw_monotonic_ns())?.sequence ?? 0
        loop.advance(to: 1, until: 2)
        seen.sleptOnce = loop.sleptOnce.load(ordering: .acquiring)
        seen.heldAt = sw_monotonic_ns()
        seen.held = probe.observe(now: seen.heldAt)?.sequence ?? 0
        loop.advance(to: 2, until: 3)
        usleep(20_000)
        if case .progress(let snapshot, let end, _) = probe.read(now: sw_monotonic_ns()) {
            seen.after = snapshot.sequence
            seen.stallEnd = end
        }
        seen.endNote = probe.endedBy
        loop.advance(to: 3, until: 0)
        #expect(
            pollUntil {
                ProcDirectory(processID: pid, threadID: tid).syscall()?.number == 7
                    && probe.observe(now: sw_monotonic_ns())?.isBusy == false
            })
        if byte == 1, seen.after == seen.followed { seen.endNote = probe.endedBy }
        probe.stallEnded()
        seen.captured = CaptureLedger.finishedCaptures(processID: pid, threadID: tid) != capturesBefore
        return seen
    }

    /// Passes of `byte` through a fresh ``MomentLoop`` until one is a case of the rule (``Attempt/unclean`` nil), at
    /// most ten; `check` judges that one. No clean attempt of ten is a failure that lists why each was unclean.
    static func firstCleanAttempt(byte: UInt8, check: (Attempt) -> Void) throws {
        let loop = try MomentLoop()
        defer { loop.stop() }
        var unclean: [String] = []
        for _ in 0..<10 {
            let seen = attempt(loop, byte: byte)
            guard let reason = seen.unclean else {
                check(seen)
                return
            }
            unclean.append(reason)
        }
        Issue.record("no attempt of ten was clean: \(unclean)")
    }

    /// Spinning, the thread sleeps 100 µs once and spins on: the look that saw the sleep is held, the next (no
    /// sleep, no call) keeps the stall going — one stall — and its end says a moment was taken as part of it.
    /// Another watcher's capture of the thread in this process (its stop reads as a sleep), or a sleep that was no
    /// voluntary switch (the thread preempted on its way into it until its timer fired: nothing for /proc to see),
    /// makes an attempt no case of the rule: up to ten attempts, one must be clean, and every clean one right.
    @Test func aMomentsSleepInsideCPUBoundWorkIsNoTurnWhenNoTurnFollows() throws {
        try Self.firstCleanAttempt(byte: 1) { seen in
            #expect(seen.held == seen.followed, "the moment's look ended the stall")
            #expect(seen.after == seen.followed, "the look after the moment ended the stall: \(seen.endNote ?? "-")")
            #expect(seen.endNote?.contains("likely one stall: 1 moment(s)") == true, "\(seen.endNote ?? "no note")")
        }
    }

    /// Spinning, the thread sleeps 100 µs once, then turns ten times: the look that saw the moment is held, the next
    /// sees the turns — the loop went on turning — and ends the stall at the held look's time. Unclean attempts as
    /// above.
    @Test func aMomentFollowedByTurnsEndsTheStallWhenTheMomentWasSeen() throws {
        try Self.firstCleanAttempt(byte: 2) { seen in
            #expect(seen.held == seen.followed, "the moment's look ended the stall")
            #expect(seen.after > seen.followed, "the turns after the moment did not end the stall")
            #expect(seen.stallEnd == seen.heldAt, "ended at \(seen.stallEnd), the moment was seen at \(seen.heldAt)")
            #expect(seen.endNote?.contains("that sleep was its turn") == true, "\(seen.endNote ?? "no note")")
        }
    }
}
