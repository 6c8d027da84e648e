// ThreadSchedule: a thread's CPU time and run-queue wait (schedstat) at one moment.
import CStallWatchCore
import Foundation

/// A thread's CPU time and run-queue wait (schedstat) at one moment: the baseline a stall's starvation verdict
/// measures from.
package struct ThreadSchedule: Sendable, Equatable {
    var cpuNanos: UInt64
    var runQueueWaitNanos: UInt64
    /// When it was read (CLOCK_MONOTONIC).
    var monotonicNanos: UInt64
    /// How many times the thread has been given a CPU (schedstat's third field, counted as it is switched in, so
    /// unlike the CPU time it moves the moment the thread starts to run); nil when not read.
    var timeslices: UInt64?
    /// Whether the thread was runnable (state R) at the reading, and how many times it had slept by then
    /// (`voluntary_ctxt_switches`); nil when not read with it.
    var runnable: Bool?
    var voluntarySwitches: UInt64?

    package init(cpuNanos: UInt64, runQueueWaitNanos: UInt64, monotonicNanos: UInt64) {
        self.cpuNanos = cpuNanos
        self.runQueueWaitNanos = runQueueWaitNanos
        self.monotonicNanos = monotonicNanos
    }

    /// Parses a `schedstat` file ("on-CPU ns, run-queue wait ns, timeslices") read at `monotonicNanos`.
    package init?(parsing text: String, monotonicNanos: UInt64) {
        let parts = text.split(separator: " ")
        guard parts.count >= 2, let cpu = UInt64(parts[0]), let wait = UInt64(parts[1]) else { return nil }
        self.init(cpuNanos: cpu, runQueueWaitNanos: wait, monotonicNanos: monotonicNanos)
        timeslices = parts.count >= 3 ? UInt64(parts[2].trimmingCharacters(in: .whitespacesAndNewlines)) : nil
    }
}

extension ThreadSchedule {
    /// How long the calling thread has waited for a CPU in all (its own `schedstat`); nil when unreadable.
    static func callingThreadRunQueueWaitNanos() -> UInt64? {
        ProcDirectory(processID: getpid(), threadID: sw_gettid()).schedstat(now: 0)?.runQueueWaitNanos
    }

    /// The `se.exec_start` of a `sched` file: the run-queue clock (milliseconds, fractional) at which the thread
    /// last started running.
    static func lastStartedRunning(inSched text: String) -> Double? {
        for line in text.split(separator: "\n") where line.hasPrefix("se.exec_start") {
            guard let colon = line.firstIndex(of: ":") else { return nil }
            return Double(line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        return nil
    }

    /// How long a blocked thread has not run, at least: its CPU's run-queue clock now minus its `se.exec_start`.
    ///
    /// Each CPU has its own run-queue clock (it leaves out the time stolen by the hypervisor and spent in
    /// interrupts, so two CPUs' clocks drift apart by seconds): the reading is only taken on the CPU the thread
    /// last ran on, whose clock set its `se.exec_start`. The calling thread moves there for one read of its own
    /// `sched` (its `se.exec_start` is then when it began running there, at or before now, so the difference
    /// errs low) and moves back. Nil when either is unreadable, the move fails, or the thread ran more recently.
    package static func notRunNanos(_ thread: ProcDirectory) -> UInt64? { notRun(thread)?.nanos }

    /// ``notRunNanos(_:)`` and the CLOCK_MONOTONIC time it is measured up to: read on the thread's CPU right
    /// after the reading itself, before the move back — which on a busy machine can wait long for a CPU, and
    /// would make a start dated from a later clock read err late by that wait.
    ///
    /// Both readings are the run queue's task clock, which on a virtual machine leaves out the time the hypervisor
    /// took from the CPU (steal, `CONFIG_PARAVIRT_TIME_ACCOUNTING`): the figure is short by that time, and a
    /// start dated from it errs late by it, never early.
    ///
    /// For a runnable thread this is the time since its CPU time and run-queue wait were last brought up to date
    /// (at its last switch or tick): waiting for a CPU now, or running. A thread that ran or moved to another CPU
    /// while this was read gives nil (its reading would be against another CPU's clock).
    ///
    /// A figure longer than the thread has existed (its `stat` start time, to the clock tick) is no reading of
    /// this thread's last run, and gives nil: once seen under load (how it arose is not known), it dated a 1.5 s
    /// deadlock from about the machine's boot.
    package static func notRun(_ thread: ProcDirectory) -> (nanos: UInt64, at: UInt64)? {
        // A thread that ran or moved while it was read gives nothing this time, nor a reading the reader was kept
        // from its CPU in the middle of (a busy machine: every few tries); a sleeping thread reads the same next
        // time, so further tries recover what a race lost — up to eight, within ``notRunBudgetNanos``. (Three were
        // seen to fail together beside other work: a spinning thread's 38 ms wait for a CPU went uncounted and its
        // busy phase was dated 54 ms late.)
        let deadline = sw_monotonic_ns() &+ notRunBudgetNanos
        for _ in 0..<8 {
            if let reading = notRunOnce(thread) { return reading }
            if sw_monotonic_ns() > deadline { break }
        }
        return nil
    }

    /// How long ``notRun(_:)`` keeps trying.
    static let notRunBudgetNanos: UInt64 = 20_000_000

    private static func notRunOnce(_ thread: ProcDirectory) -> (nanos: UInt64, at: UInt64)? {
        guard let stat = thread.stat(), let cpu = stat.processor, cpu >= 0, cpu < 1024,
            let theirs = thread.text("sched").flatMap(lastStartedRunning(inSched:)),
            let (ours, at) = ownLastStartedRunning(onCPU: cpu), ours > theirs,
            thread.text("sched").flatMap(lastStartedRunning(inSched:)) == theirs, thread.stat()?.processor == cpu
        else { return nil }
        let nanos = UInt64((ours - theirs) * 1_000_000)
        guard nanos <= livedNanos(startTimeTicks: stat.startTimeTicks, at: at) else { return nil }
        return (nanos, at)
    }

    /// How long a thread that started at `startTimeTicks` (`stat` field 22, clock ticks after boot) has existed at
    /// `at` (CLOCK_MONOTONIC), rounded up by one tick.
    static func livedNanos(startTimeTicks: UInt64, at: UInt64) -> UInt64 {
        // `at` on the boot clock (the two clocks differ by the time the machine was suspended).
        let atBoot = at &+ (sw_boottime_ns() &- sw_monotonic_ns())
        let tick = 1_000_000_000 / ProcStat.ticksPerSecond
        let started = startTimeTicks * tick
        return atBoot > started ? atBoot - started + tick : 0
    }

    /// The calling thread's `se.exec_start` read while it runs on `cpu`, and the monotonic time just after; its
    /// CPU affinity is restored after.
    ///
    /// A reading that took longer than ``ownReadingLimitNanos`` gives nil: the calling thread was kept from its CPU
    /// in the middle of it (a busy machine), and its `exec_start` may be from before that wait while the time taken
    /// after it is not — the wait would be counted as the other thread's running, and a time dated from the
    /// reading would err late by it (seen: 223 ms).
    private static func ownLastStartedRunning(onCPU cpu: Int32) -> (Double, UInt64)? {
        var saved = [UInt8](repeating: 0, count: 128)
        guard sw_pin_to_cpu(cpu, &saved, 128) == 0 else { return nil }
        defer { _ = sw_set_affinity(saved, 128) }
        guard sw_current_cpu() == cpu else { return nil }
        let before = sw_monotonic_ns()
        let text = ProcFile.text("/proc/thread-self/sched")
        let at = sw_monotonic_ns()
        guard at &- before <= ownReadingLimitNanos, sw_current_cpu() == cpu,
            let started = text.flatMap(lastStartedRunning(inSched:))
        else { return nil }
        return (started, at)
    }

    /// The longest a reading of the calling thread's own `sched` may take (it takes tens of microseconds on a CPU
    /// of its own).
    static let ownReadingLimitNanos: UInt64 = 2_000_000
}
