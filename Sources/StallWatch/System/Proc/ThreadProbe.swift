// Reading one thread's kernel-side state from /proc/<pid>/task/<tid>/: the evidence behind a stall's cause.

/// What the kernel says about a thread at one instant.
package struct ThreadProbe: Sendable, Equatable {
    var threadID: Int32
    /// `comm`: the thread's name.
    package var name: String
    /// The state letter: R running, S sleeping, D disk sleep, T stopped, t traced, Z zombie …
    package var state: String
    /// The kernel function the thread sleeps in (`futex_wait_queue`, `do_epoll_wait` …); nil when running.
    package var wchan: String?
    /// The system call the thread is in, or nil when running in user space (or unreadable).
    var syscall: Int?
    /// The system call's first argument (the futex word's address for `futex`).
    package var syscallArg0: UInt64?
    /// User + system CPU time, nanoseconds.
    var cpuNanos: UInt64
    var voluntarySwitches: UInt64
    var involuntarySwitches: UInt64
    /// Time spent runnable but waiting for a CPU (schedstat), nanoseconds.
    var runQueueWaitNanos: UInt64
    /// False when `schedstat` could not be read (a thread that is exiting): the CPU time is then stat's clock
    /// ticks and the run-queue wait 0, no figures to take a difference with.
    var scheduleRead = true
    /// The whole `syscall` reading: arguments, stack pointer and program counter.
    package var wait: ThreadWait? = nil
    /// For a thread runnable but not running at the reading, how long it had waited for a CPU then: a wait the
    /// kernel adds to `runQueueWaitNanos` only once the thread runs again. Nil when not read
    /// (``readWaitUnderWay(pid:)``).
    var queuedNanos: UInt64? = nil

    package var syscallName: String? { syscall.map(SyscallTable.name) }
    /// The call's class, judged by its content where it has one (a `select` on no descriptor is a sleep).
    package var syscallKind: SyscallTable.Kind? { wait?.kind ?? syscall.map(SyscallTable.kind) }

    /// The state letter's meaning.
    package var stateDescription: String { state.first.flatMap(ProcStat.name(ofState:)) ?? state }

    /// Reads `/proc/<pid>/task/<tid>/`; nil if the thread is gone.
    static func read(pid: Int32, tid: Int32) -> ThreadProbe? {
        let directory = ProcDirectory(processID: pid, threadID: tid)
        guard let stat = directory.stat() else { return nil }
        var probe = ThreadProbe(
            threadID: tid, name: stat.name, state: String(stat.state), wchan: directory.wchan(), syscall: nil,
            syscallArg0: nil, cpuNanos: stat.cpuNanos, voluntarySwitches: 0, involuntarySwitches: 0,
            runQueueWaitNanos: 0)
        if let wait = directory.syscall() {
            probe.wait = wait
            probe.syscall = wait.number
            probe.syscallArg0 = wait.arguments.first
        }
        if let status = directory.status() {
            probe.voluntarySwitches = status.voluntarySwitches ?? 0
            probe.involuntarySwitches = status.involuntarySwitches ?? 0
        }
        // Nanosecond CPU time, finer than stat's clock ticks.
        if let schedule = directory.schedstat(now: 0) {
            probe.cpuNanos = schedule.cpuNanos
            probe.runQueueWaitNanos = schedule.runQueueWaitNanos
        } else {
            probe.scheduleRead = false
        }
        return probe
    }

    /// Reads ``queuedNanos`` for a runnable thread that was taken off its CPU on the way back from an interrupt —
    /// preempted, its kernel stack ending in the interrupt's exit path — and so has waited for a CPU since it last
    /// ran: the time since then (``ThreadSchedule/notRun(_:)``). A thread woken from a sleep and not yet run is
    /// runnable too, but its stack is still in the call it slept in, and its last run ended with the sleep: it gets
    /// none. A running thread's stack is the one of its last switch, so its caller reads this only when the
    /// thread's CPU time has not moved since an earlier reading. Needs the kernel stack (`CAP_SYS_ADMIN`).
    mutating func readWaitUnderWay(pid: Int32) {
        guard state == "R", let names = KernelStack.read(pid: pid, tid: threadID), KernelStack.isPreempted(names)
        else { return }
        let directory = ProcDirectory(processID: pid, threadID: threadID)
        // Not run since this reading (its CPU time unchanged): the figure is of the same wait.
        guard let notRun = ThreadSchedule.notRun(directory), directory.schedstat(now: 0)?.cpuNanos == cpuNanos
        else { return }
        queuedNanos = notRun.nanos
    }

    /// The thread ids of process `pid`.
    static func threadIDs(pid: Int32) -> [Int32] { ProcDirectory(processID: pid).threadIDs() }
}
