// Reading one thread's kernel-side state from /proc/<pid>/task/<tid>/: the evidence behind a stall's cause.
import Foundation

/// What the kernel says about a thread at one instant.
public struct ThreadProbe: Sendable, Equatable {
    public var threadID: Int32
    /// `comm`: the thread's name.
    public var name: String
    /// The state letter: R running, S sleeping, D disk sleep, T stopped, t traced, Z zombie …
    public var state: String
    /// The kernel function the thread sleeps in (`futex_wait_queue`, `do_epoll_wait` …); nil when running.
    public var wchan: String?
    /// The system call the thread is in, or nil when running in user space (or unreadable).
    public var syscall: Int?
    /// The system call's first argument (the futex word's address for `futex`).
    public var syscallArg0: UInt64?
    /// User + system CPU time, nanoseconds.
    public var cpuNanos: UInt64
    public var voluntarySwitches: UInt64
    public var involuntarySwitches: UInt64
    /// Time spent runnable but waiting for a CPU (schedstat), nanoseconds.
    public var runQueueWaitNanos: UInt64
    /// The whole `syscall` reading: arguments, stack pointer and program counter.
    public var wait: ThreadWait? = nil

    public var syscallName: String? { syscall.map(SyscallTable.name) }
    /// The call's class, judged by its content where it has one (a `select` on no descriptor is a sleep).
    public var syscallKind: SyscallTable.Kind? { wait?.kind ?? syscall.map(SyscallTable.kind) }

    /// The state letter's meaning.
    public var stateDescription: String {
        switch state {
        case "R": return "running"
        case "S": return "sleeping"
        case "D": return "disk sleep"
        case "T": return "stopped"
        case "t": return "tracing stop"
        case "Z": return "zombie"
        case "X": return "dead"
        case "I": return "idle"
        default: return state
        }
    }

    /// Reads `/proc/<pid>/task/<tid>/`; nil if the thread is gone.
    public static func read(pid: Int32, tid: Int32) -> ThreadProbe? {
        let dir = "/proc/\(pid)/task/\(tid)"
        guard let stat = ProcFile.text("\(dir)/stat") else { return nil }
        // comm may contain spaces and parentheses: the state follows the last ')'.
        guard let close = stat.lastIndex(of: ")"), let open = stat.firstIndex(of: "(") else { return nil }
        let name = String(stat[stat.index(after: open)..<close])
        let fields = stat[stat.index(close, offsetBy: 2)...].split(separator: " ")
        guard fields.count > 13 else { return nil }
        let ticks = UInt64(sysconf(Int32(_SC_CLK_TCK)))
        let utime = UInt64(fields[11]) ?? 0
        let stime = UInt64(fields[12]) ?? 0
        var probe = ThreadProbe(
            threadID: tid, name: name, state: String(fields[0]), wchan: nil, syscall: nil, syscallArg0: nil,
            cpuNanos: (utime + stime) * 1_000_000_000 / max(ticks, 1), voluntarySwitches: 0, involuntarySwitches: 0,
            runQueueWaitNanos: 0)
        if let wchan = ProcFile.text("\(dir)/wchan"), !wchan.isEmpty, wchan != "0" { probe.wchan = wchan }
        if let line = ProcFile.text("\(dir)/syscall") {
            probe.wait = ThreadWait(line: line)
            // "202 0x7f… 0x80 …" (number, six args, sp, pc), "running", or "-1 sp pc" (not in a syscall).
            let parts = line.split(separator: " ")
            if let first = parts.first, let number = Int(first), number >= 0 {
                probe.syscall = number
                if parts.count > 1 { probe.syscallArg0 = UInt64(hexAddress: String(parts[1])) }
            }
        }
        if let status = ProcFile.text("\(dir)/status") {
            for line in status.split(separator: "\n") {
                if line.hasPrefix("voluntary_ctxt_switches:") {
                    probe.voluntarySwitches = UInt64(line.split(separator: "\t").last ?? "") ?? 0
                } else if line.hasPrefix("nonvoluntary_ctxt_switches:") {
                    probe.involuntarySwitches = UInt64(line.split(separator: "\t").last ?? "") ?? 0
                }
            }
        }
        if let schedstat = ProcFile.text("\(dir)/schedstat") {
            // "on-CPU ns, run-queue wait ns, timeslices": nanosecond CPU time, finer than stat's clock ticks.
            let parts = schedstat.split(separator: " ")
            if parts.count >= 2 {
                if let onCPU = UInt64(parts[0]) { probe.cpuNanos = onCPU }
                probe.runQueueWaitNanos = UInt64(parts[1]) ?? 0
            }
        }
        return probe
    }

    /// The thread's CPU time and run-queue wait now, from `schedstat`; nil when it cannot be read.
    package static func schedule(pid: Int32, tid: Int32, now: UInt64) -> ThreadSchedule? {
        guard let text = ProcFile.text("/proc/\(pid)/task/\(tid)/schedstat") else { return nil }
        let parts = text.split(separator: " ")
        guard parts.count >= 2, let cpu = UInt64(parts[0]), let wait = UInt64(parts[1]) else { return nil }
        return ThreadSchedule(cpuNanos: cpu, runQueueWaitNanos: wait, monotonicNanos: now)
    }

    /// The thread ids of process `pid`.
    public static func threadIDs(pid: Int32) -> [Int32] {
        ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []).compactMap { Int32($0) }
            .sorted()
    }
}
