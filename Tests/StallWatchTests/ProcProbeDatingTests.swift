// Dating a /proc-watched thread's busy phase from the kernel's own figures, not from the look that saw it.
import CStallWatchCore
import Foundation
import StallWatchTestSupport
import Synchronization
import Testing

@testable import StallWatch

#if canImport(Glibc)
    import Glibc
#endif

@Suite(.offPool, .serialized) struct ProcProbeDatingTests {
    /// A thread of this process that idles in `poll` on a pipe (``PollPipeLoop``) and, for each byte, spins (1) or
    /// sleeps (2) for 400 ms, or sleeps twice for 5 ms and then for 400 ms (3), noting CLOCK_MONOTONIC as the 400 ms
    /// start; 0 ends it. It shares its figures through atomics, never a lock: waiting for a lock the test holds would
    /// be a voluntary switch of its own between its wake-up and its work, which the dating rule rightly declines to
    /// date through.
    final class PipeLoop: PollPipeLoop, @unchecked Sendable {  // Atomics only.
        let started = Atomic<UInt64>(0)
        /// CLOCK_MONOTONIC as its last piece of work ended, just before it went back to its `poll`.
        let ended = Atomic<UInt64>(0)
        /// Its run-queue wait (schedstat) read just before `ended`: what it waits for a CPU from there until it is
        /// back in its `poll` is time it has not yet gone back to idling.
        let runQueueWaitAtEnd = Atomic<UInt64>(0)

        override func work(_ byte: UInt8) {
            if byte == 3 {
                // Two short calls of its own first: progress, then the long sleep.
                usleep(5_000)
                usleep(5_000)
            }
            let now = sw_monotonic_ns()
            started.store(now, ordering: .releasing)
            if byte == 1 {
                while sw_monotonic_ns() < now + 400_000_000 {}
            } else {
                usleep(400_000)
            }
            let tid = threadID.load(ordering: .relaxed)
            let wait = ProcDirectory(processID: getpid(), threadID: tid).schedstat(now: 0)?.runQueueWaitNanos
            runQueueWaitAtEnd.store(wait ?? 0, ordering: .relaxed)
            ended.store(sw_monotonic_ns(), ordering: .releasing)
        }
    }

    /// `loop`'s thread, once it waits in its `poll`.
    static func threadInPoll(_ loop: PipeLoop) -> Int32 {
        #expect(
            pollUntil {
                let tid = loop.threadID.load(ordering: .acquiring)
                return tid != 0 && ProcDirectory(processID: getpid(), threadID: tid).syscall()?.number == 7
            })
        return loop.threadID.load(ordering: .acquiring)
    }

    /// A probe of `loop`'s thread once it waits in its `poll`, which three looks 20 ms apart have seen idle.
    static func probeSeeingIdle(_ loop: PipeLoop) -> ProcProgressProbe {
        let pid = getpid()
        let tid = threadInPoll(loop)
        var probe = ProcProgressProbe(processID: pid, threadID: tid, now: sw_monotonic_ns())
        for _ in 0..<3 {
            #expect(probe.observe(now: sw_monotonic_ns())?.isBusy == false)
            usleep(20_000)
        }
        return probe
    }

    /// Seen idle in its `poll`, then, 150 ms after it left it, busy on a CPU or in a sleep: the phase starts when
    /// it left the wait (never before the byte that woke it was sent, within 20 ms of the thread's own reading of
    /// its start), not at the look that saw it busy.
    ///
    /// The rule dates through the voluntary switches the thread's own work explains (none for the spin, one for the
    /// sleep) and declines to date through more, erring late. Another test's watchdog in this process may stop the
    /// thread for an all-threads snapshot meanwhile (two switches more): that attempt is no case of the rule, so it
    /// is only checked never to date early, and the case is tried again, up to ten times (the suite's other
    /// watchdogs snapshot every thread of the process often); one attempt must be clean, and every clean one dated
    /// right.
    @Test(arguments: [UInt8(1), 2])
    func aThreadSeenLeavingItsIdleWaitIsDatedFromWhenItLeftIt(work: UInt8) throws {
        let loop = try PipeLoop()
        defer { loop.stop() }
        let pid = getpid()
        let ownSwitches: UInt64 = work == 1 ? 0 : 1
        var unclean: [String] = []
        var clean = false
        for _ in 0..<10 where !clean {
            var probe = Self.probeSeeingIdle(loop)
            let tid = loop.threadID.load(ordering: .acquiring)
            let directory = ProcDirectory(processID: pid, threadID: tid)
            let switchesBefore = directory.status()?.voluntarySwitches ?? 0
            let wakesBefore = loop.wakes.load(ordering: .relaxed)
            let startedBefore = loop.started.load(ordering: .acquiring)
            let sentAt = sw_monotonic_ns()
            let stealBefore = Self.stealTicks()
            loop.send(work)
            #expect(pollUntil { loop.started.load(ordering: .acquiring) != startedBefore })
            let startedAt = loop.started.load(ordering: .acquiring)
            usleep(150_000)
            let seen = probe.observe(now: sw_monotonic_ns())
            // What the dating rule works from, for a failure to name the path it took.
            let switches = (directory.status()?.voluntarySwitches ?? 0) &- switchesBefore
            let notRun = ThreadSchedule.notRunNanos(directory).map { "\($0 / 1_000_000) ms" } ?? "unreadable"
            let evidence =
                "\(switches) voluntary switches and \(loop.wakes.load(ordering: .relaxed) - wakesBefore) poll returns "
                + "since the last idle look, not run for \(notRun)"
            let stealMs = Self.stealMs(since: stealBefore)
            let busy = try #require(seen)
            #expect(busy.isBusy)
            #expect(busy.phaseStartNanos >= sentAt, "dated \(Int64(sentAt) - Int64(busy.phaseStartNanos)) ns too early")
            // The piece of work ends before the next attempt sends its byte.
            #expect(pollUntil { loop.ended.load(ordering: .acquiring) > startedAt })
            guard switches <= ownSwitches else {
                unclean.append(evidence)
                continue
            }
            // The kernel's task clock (`se.exec_start`) leaves out the time the hypervisor took from the CPU
            // (steal): the start errs late by up to that time, read here from /proc/stat (in clock ticks, one more
            // for its rounding down), on top of 20 ms.
            #expect(
                busy.phaseStartNanos <= startedAt + 20_000_000 + UInt64(stealMs) * 1_000_000,
                "dated \((Int64(busy.phaseStartNanos) - Int64(startedAt)) / 1_000_000) ms after the thread's own start (steal up to \(stealMs) ms; \(evidence))"
            )
            clean = true
        }
        #expect(clean, "no attempt of ten was clean (its own work explains \(ownSwitches) switches): \(unclean)")
    }

    /// A followed stall seen over only by a late look (the watcher busy, or waiting for a CPU): it ended when the
    /// thread went back into its idle wait — the kernel's figure of when it last ran — not at that look, within
    /// 20 ms (and the hypervisor's steal, and any wait of the thread for a CPU on its way back to its `poll`) after
    /// the thread's own reading of its end, and never before it.
    ///
    /// A capture of the idle thread by another test's watchdog in this process between its end and the look (an
    /// all-thread snapshot stops it and restarts its `poll`: it ran again, after its end) leaves no trace of when the
    /// thread itself last ran, so that attempt is no case of the rule: it is only checked never to end early, and
    /// the case is tried again, up to ten times (the suite's other watchdogs snapshot every thread of the process
    /// often); one attempt must be clean, and every clean one dated right.
    @Test func aStallSeenOverByALateLookEndsWhenTheThreadWentBackToItsIdleWait() throws {
        let loop = try PipeLoop()
        defer { loop.stop() }
        let pid = getpid()
        var unclean: [String] = []
        var clean = false
        for _ in 0..<10 where !clean {
            var probe = Self.probeSeeingIdle(loop)
            let tid = loop.threadID.load(ordering: .acquiring)
            let directory = ProcDirectory(processID: pid, threadID: tid)
            let startedBefore = loop.started.load(ordering: .acquiring)
            loop.send(1)
            #expect(pollUntil { loop.started.load(ordering: .acquiring) != startedBefore })
            let startedAt = loop.started.load(ordering: .acquiring)
            usleep(50_000)
            #expect(probe.observe(now: sw_monotonic_ns())?.isBusy == true)
            probe.stallBegan()
            #expect(pollUntil { loop.ended.load(ordering: .acquiring) > startedAt && directory.syscall()?.number == 7 })
            let capturesAtEnd = CaptureLedger.finishedCaptures(processID: pid, threadID: tid)
            let endedAt = loop.ended.load(ordering: .acquiring)
            let stealBefore = Self.stealTicks()
            usleep(300_000)
            let lookAt = sw_monotonic_ns()
            // Between its end and its `poll` the thread may have waited for a CPU: it was back in its idle wait only
            // after that wait, which its run-queue figure (unchanged while it sleeps) holds.
            let waitedAfterEnd =
                (directory.schedstat(now: 0)?.runQueueWaitNanos ?? 0) &- loop.runQueueWaitAtEnd.load(ordering: .relaxed)
            let reading = probe.read(now: lookAt)
            let captured = CaptureLedger.finishedCaptures(processID: pid, threadID: tid) != capturesAtEnd
            guard case .progress(let snapshot, let stallEnd, _) = reading else {
                Issue.record("the thread was not read")
                return
            }
            probe.stallEnded()
            let stealMs = Self.stealMs(since: stealBefore)
            #expect(!snapshot.isBusy)
            #expect(stallEnd >= endedAt, "ended \(Int64(endedAt) - Int64(stallEnd)) ns before the thread's own end")
            let lateMs = (Int64(stallEnd) - Int64(endedAt)) / 1_000_000
            let lookMs = (Int64(lookAt) - Int64(endedAt)) / 1_000_000
            let dated =
                "ended \(lateMs) ms after the thread's own end, the look \(lookMs) ms after it (steal up to \(stealMs) "
                + "ms; the thread waited \(waitedAfterEnd / 1_000_000) ms for a CPU after its end)"
            if captured {
                unclean.append("another watcher captured the idle thread: \(dated)")
                continue
            }
            let bound: UInt64 = endedAt + 20_000_000 + UInt64(stealMs) * 1_000_000 + waitedAfterEnd
            #expect(stallEnd <= bound, "\(dated)")
            clean = true
        }
        #expect(clean, "no attempt of ten went uncaptured by another watcher: \(unclean)")
    }

    /// Seen idle, then only by a look 250 ms late (the watcher kept from a CPU, or busy): by then the thread left its
    /// wait, made two short sleeps of its own (progress, and more switches than the idle-look rule dates through)
    /// and blocked in a long one. Its stuck phase began when it last ran — within 20 ms (and the hypervisor's
    /// steal) after the thread's own reading of when its long sleep began, never before the byte was sent — not at
    /// the late look. A capture of the thread by another test's watchdog in this process (the sleep restarted, so
    /// it ran again) makes an attempt no case of the rule: it is tried again, up to ten times (a suite run beside
    /// it captured the thread in three attempts of three: the process's other watchdogs snapshot every thread).
    @Test func aThreadFoundBlockedByALateLookIsDatedFromWhenItLastRan() throws {
        let loop = try PipeLoop()
        defer { loop.stop() }
        var attempts: [String] = []
        var clean = false
        for _ in 0..<10 where !clean {
            var probe = Self.probeSeeingIdle(loop)
            let directory = ProcDirectory(processID: getpid(), threadID: loop.threadID.load(ordering: .acquiring))
            let startedBefore = loop.started.load(ordering: .acquiring)
            let sentAt = sw_monotonic_ns()
            let stealBefore = Self.stealTicks()
            loop.send(3)
            #expect(
                pollUntil {
                    loop.started.load(ordering: .acquiring) != startedBefore && directory.status()?.state == "S"
                        && directory.syscall()?.number == 230
                })
            let startedAt = loop.started.load(ordering: .acquiring)
            let cpuBlocked = directory.schedstat(now: 0)?.cpuNanos
            usleep(250_000)
            let lookAt = sw_monotonic_ns()
            let observed = probe.observe(now: lookAt)
            let seen = try #require(observed)
            let ranSince = directory.schedstat(now: 0)?.cpuNanos != cpuBlocked
            let stealMs = Self.stealMs(since: stealBefore)
            #expect(seen.isBusy)
            #expect(seen.phaseStartNanos >= sentAt, "dated \(Int64(sentAt) - Int64(seen.phaseStartNanos)) ns too early")
            #expect(pollUntil { loop.ended.load(ordering: .acquiring) > startedAt })
            let dated =
                "dated \((Int64(seen.phaseStartNanos) - Int64(startedAt)) / 1_000_000) ms after the thread's own "
                + "start, the look \((Int64(lookAt) - Int64(startedAt)) / 1_000_000) ms after it (steal up to \(stealMs) ms)"
            if ranSince {
                attempts.append("the thread ran in its sleep (a capture): \(dated)")
                continue
            }
            #expect(seen.phaseStartNanos <= startedAt + 20_000_000 + UInt64(stealMs) * 1_000_000, "\(dated)")
            clean = true
        }
        #expect(clean, "no attempt of ten left the thread unrun in its sleep: \(attempts)")
    }

    /// Threads of this process spinning on CPU 0 until told to stop, one of them niced to 19 behind the others.
    final class Spinners: @unchecked Sendable {  // Everything shared is atomic.
        let nicedThreadID = Atomic<Int32>(0)
        let stop = Atomic<Bool>(false)
        let exited = DispatchSemaphore(value: 0)
        let count: Int

        init(competing: Int) {
            count = competing + 1
            for index in 0..<count {
                Thread { [self] in
                    var saved = [UInt8](repeating: 0, count: 128)
                    _ = sw_pin_to_cpu(0, &saved, 128)
                    if index == 0 {
                        _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), id_t(sw_gettid()), 19)
                        nicedThreadID.store(sw_gettid(), ordering: .releasing)
                    }
                    while !stop.load(ordering: .relaxed) {}
                    exited.signal()
                }.start()
            }
        }

        func end() {
            stop.store(true, ordering: .relaxed)
            for _ in 0..<count { exited.wait() }
        }
    }

    /// A niced thread behind two spinners on its CPU is preempted and waits long for its next turn, which the
    /// kernel's run-queue figure counts only once it runs: the wait under way is read from when it last ran — at
    /// most since the last reading that found its CPU time lower, and at least since the first that found it where
    /// it is, less what the figure leaves out: it is read on the CPU's task clock, which does not count the time
    /// the CPU spent in interrupts or the hypervisor took from it (`/proc/stat`, to the clock tick).
    @Test func aPreemptedThreadsWaitForACPUIsMeasuredWhileItLasts() throws {
        let spinners = Spinners(competing: 2)
        defer { spinners.end() }
        #expect(pollUntil { spinners.nicedThreadID.load(ordering: .acquiring) != 0 })
        let (pid, tid) = (getpid(), spinners.nicedThreadID.load(ordering: .acquiring))
        try #require(
            KernelStack.read(pid: pid, tid: sw_gettid()) != nil, "the kernel stack needs CAP_SYS_ADMIN (run as root)")
        var (cpu, sameSince, lowerAt, takenAtSame) = (UInt64.max, UInt64(0), UInt64(0), UInt64(0))
        var measured: (queued: UInt64, at: UInt64, after: UInt64, taken: UInt64)?
        let found = pollUntil(timeout: .seconds(10), every: .milliseconds(10)) {
            let taken = Self.cpu0TicksNotOnTheTaskClock()
            guard var probe = ThreadProbe.read(pid: pid, tid: tid) else { return false }
            let at = sw_monotonic_ns()
            if probe.cpuNanos != cpu {
                (cpu, lowerAt, sameSince, takenAtSame) = (probe.cpuNanos, sameSince, at, taken)
            }
            guard probe.state == "R", lowerAt != 0, at - sameSince >= 100_000_000 else { return false }
            probe.readWaitUnderWay(pid: pid)
            guard let queued = probe.queuedNanos else { return false }
            measured = (queued, at, sw_monotonic_ns(), Self.cpu0TicksNotOnTheTaskClock())
            return true
        }
        try #require(found, "the niced thread was never seen waiting 100 ms for a CPU with its wait readable")
        let (queued, at, after, taken) = try #require(measured)
        // Each count is to the tick: one more at each end.
        let notCounted = (taken - takenAtSame + 2) * (1_000_000_000 / ProcStat.ticksPerSecond)
        #expect(
            queued + notCounted >= at - sameSince,
            """
            waited \(queued / 1_000_000) ms, unchanged for \((at - sameSince) / 1_000_000) ms, \
            \(notCounted / 1_000_000) ms not on the task clock
            """)
        #expect(
            queued <= after - lowerAt, "waited \(queued / 1_000_000) ms, ran within \((after - lowerAt) / 1_000_000) ms"
        )
    }

    /// CPU 0's time in interrupts and taken by the hypervisor so far (`irq`, `softirq`, `steal`), in clock ticks.
    static func cpu0TicksNotOnTheTaskClock() -> UInt64 {
        let text = (try? String(contentsOfFile: "/proc/stat", encoding: .utf8)) ?? ""
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix("cpu0 ") }) else { return 0 }
        let fields = line.split(separator: " ").dropFirst().compactMap { UInt64($0) }
        return fields.count > 7 ? fields[5] + fields[6] + fields[7] : 0
    }

    /// The most steal time any CPU had since `before` (``stealTicks()``), in milliseconds, one clock tick more for
    /// /proc/stat's rounding down.
    static func stealMs(since before: [UInt64]) -> Int64 {
        stealTicks().enumerated().map { cpu, ticks in Int64(ticks - (before.count > cpu ? before[cpu] : ticks)) }
            .max().map { ($0 + 1) * 1000 / Int64(sysconf(Int32(_SC_CLK_TCK))) } ?? 0
    }

    /// Each CPU's steal time so far, in /proc/stat's clock ticks (`_SC_CLK_TCK` per second).
    static func stealTicks() -> [UInt64] {
        let text = (try? String(contentsOfFile: "/proc/stat", encoding: .utf8)) ?? ""
        return text.split(separator: "\n").filter { $0.hasPrefix("cpu") && !$0.hasPrefix("cpu ") }.map { line in
            let fields = line.split(separator: " ")
            return fields.count > 8 ? UInt64(fields[8]) ?? 0 : 0
        }
    }

    /// A "not run since" figure is bounded by how long the thread has existed: a thread started just now has lived
    /// at most the time since (to the clock tick), and one dated from boot has lived about as long as the machine.
    @Test func aThreadsLifeIsMeasuredFromItsStartTimeOnTheMonotonicClock() throws {
        let tid = Atomic<Int32>(0)
        let started = sw_monotonic_ns()
        let exit = DispatchSemaphore(value: 0)
        Thread {
            tid.store(sw_gettid(), ordering: .releasing)
            exit.wait()
        }.start()
        defer { exit.signal() }
        #expect(pollUntil { tid.load(ordering: .acquiring) != 0 })
        let stat = try #require(ProcDirectory(processID: getpid(), threadID: tid.load(ordering: .acquiring)).stat())
        let now = sw_monotonic_ns()
        let tick = 1_000_000_000 / ProcStat.ticksPerSecond
        let lived = ThreadSchedule.livedNanos(startTimeTicks: stat.startTimeTicks, at: now)
        #expect(lived <= now - started + 2 * tick, "lived \(lived / 1_000_000) ms")
        let sinceBoot = sw_boottime_ns()
        let fromBoot = ThreadSchedule.livedNanos(startTimeTicks: 0, at: sw_monotonic_ns())
        #expect(fromBoot >= sinceBoot && fromBoot <= sinceBoot + 2 * tick + 100_000_000)
    }
}
