// ProcDirectory: one /proc/<pid> or /proc/<pid>/task/<tid> directory, and each file StallWatch reads in it.
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The `/proc` directory of one process (`/proc/<pid>`) or of one of its threads (`/proc/<pid>/task/<tid>`),
/// with a reader for every file StallWatch looks at, each file parsed in one place: `stat` (``ProcStat``),
/// `status` and `io` (``ProcFields``), `syscall` (``ThreadWait``), `schedstat` (``ThreadSchedule``), `maps`
/// (``ProcMapping``), `wchan`, `comm` and the kernel `stack` (``KernelStack``).
///
/// Every reader returns nil when the file cannot be read (the thread or process is gone, or access is refused),
/// with `errno` saying why; nothing here stops or signals the thread. A new /proc reading belongs here: a method
/// that reads the file and a type (or an extension of ``ProcFields``) that parses it.
///
/// `package`: the sidecar reads another process's files with the same code.
package struct ProcDirectory: Sendable, Hashable {
    package let processID: Int32
    /// The thread, or nil for the process's own directory.
    package let threadID: Int32?

    /// `/proc/<processID>`.
    package init(processID: Int32) {
        self.processID = processID
        threadID = nil
    }

    /// `/proc/<processID>/task/<threadID>`.
    package init(processID: Int32, threadID: Int32) {
        self.processID = processID
        self.threadID = threadID
    }

    /// This process's directory (`/proc/<getpid()>`, not `/proc/self`, so thread paths name the process).
    package static var current: ProcDirectory { ProcDirectory(processID: getpid()) }

    /// The directory's path.
    package var path: String {
        threadID.map { "/proc/\(processID)/task/\($0)" } ?? "/proc/\(processID)"
    }

    /// The directory of thread `tid` of this directory's process.
    package func thread(_ tid: Int32) -> ProcDirectory { ProcDirectory(processID: processID, threadID: tid) }

    /// Whether the directory exists (the process or thread has not been reaped).
    package var exists: Bool { access(path, F_OK) == 0 }

    /// The text of the file `name` in this directory, without trailing newlines; nil (with `errno`) when it
    /// cannot be read.
    package func text(_ name: String) -> String? { ProcFile.text(path + "/" + name) }

    // MARK: The files

    /// `stat`: state, name, CPU time, start time.
    package func stat() -> ProcStat? { text("stat").flatMap(ProcStat.init(parsing:)) }

    /// `status`: the `Key:\tvalue` lines (state, context switches, signal masks, tracer).
    package func status() -> ProcFields? { text("status").map(ProcFields.init(parsing:)) }

    /// `io`: the thread's or process's I/O counters (`syscr`, `syscw`, …).
    package func io() -> ProcFields? { text("io").map(ProcFields.init(parsing:)) }

    /// `syscall`: the system call the thread is in, with its arguments, stack pointer and program counter.
    /// Needs ptrace-read rights on the target (reading it does not stop the thread).
    ///
    /// A `restart_syscall` is read as the call it continues where the kernel function the thread sleeps in names it
    /// (``ThreadWait/continuing(wchan:)``): a stop — any ptrace stop, SIGSTOP and SIGCONT, another watcher's
    /// capture — turns a timed poll, futex wait or sleep into one, with the registers of the original call.
    package func syscall() -> ThreadWait? {
        guard let wait = text("syscall").flatMap(ThreadWait.init(line:)) else { return nil }
        guard wait.number == ThreadWait.restartSyscall, let wchan = wchan() else { return wait }
        return wait.continuing(wchan: wchan)
    }

    /// `schedstat`: CPU time and run-queue wait, read at `now` (CLOCK_MONOTONIC).
    func schedstat(now: UInt64) -> ThreadSchedule? {
        text("schedstat").flatMap { ThreadSchedule(parsing: $0, monotonicNanos: now) }
    }

    /// `maps`: every mapping of the process, in address order.
    package func maps() -> [ProcMapping]? { text("maps").map(ProcMapping.all(in:)) }

    /// `wchan`: the kernel function the thread sleeps in; nil when it runs (the file says `0` or nothing).
    package func wchan() -> String? {
        guard let wchan = text("wchan"), !wchan.isEmpty, wchan != "0" else { return nil }
        return wchan
    }

    /// `comm`: the thread's (or process's main thread's) name, at most 15 bytes.
    package func comm() -> String? { text("comm") }

    /// `stack`: the thread's kernel stack, innermost first (needs `CAP_SYS_ADMIN`).
    func kernelStack() -> [String]? { text("stack").flatMap(KernelStack.functions(in:)) }

    /// Whether reading the thread's `syscall` file is refused (EACCES, EPERM): it needs the same rights as ptrace,
    /// so this is a cheap, attach-free check of them.
    package var refusesPtraceReads: Bool { text("syscall") == nil && (errno == EACCES || errno == EPERM) }

    /// The process's threads, by id (the `task` directory).
    package func threadIDs() -> [Int32] {
        let task = "/proc/\(processID)/task"
        return ((try? FileManager.default.contentsOfDirectory(atPath: task)) ?? []).compactMap { Int32($0) }.sorted()
    }
}
