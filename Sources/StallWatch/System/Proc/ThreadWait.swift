// ThreadWait: one reading of /proc/<pid>/task/<tid>/syscall, and what the call waits on.

/// Where a thread was at one look, as `/proc/<pid>/task/<tid>/syscall` says: in a system call (its number,
/// six arguments, the user stack pointer and program counter), running, or in user space.
///
/// Reading it does not stop the thread; it needs ptrace-read rights on the target.
package struct ThreadWait: Sendable, Hashable {
    /// The system call, or nil when the thread is running or in user space.
    package var number: Int?
    /// The call's six arguments (empty when not in a call).
    package var arguments: [UInt64]
    var stackPointer: UInt64
    var programCounter: UInt64
    /// The call is one a stop interrupted, continued by `restart_syscall`, and ``number`` the call it continues
    /// (``continuing(wchan:)``).
    private(set) var restarted = false

    package init(number: Int?, arguments: [UInt64] = [], stackPointer: UInt64 = 0, programCounter: UInt64 = 0) {
        self.number = number
        self.arguments = arguments
        self.stackPointer = stackPointer
        self.programCounter = programCounter
    }

    /// x86_64 `restart_syscall`.
    static let restartSyscall = 219

    /// This `restart_syscall` as the call it continues, named by `wchan`, the kernel function the thread sleeps in:
    /// a poll (`poll_schedule_timeout`, `do_sys_poll`, `do_restart_poll`), a futex wait (`futex_wait_queue`,
    /// `futex_wait_queue_me`, `futex_wait`) or a sleep (`do_nanosleep`, `hrtimer_nanosleep`: `clock_nanosleep`, which
    /// glibc's `nanosleep` calls, when the first argument reads as a clock id, else `nanosleep`). The kernel restarts
    /// just these three this way after a stop (a timed poll, a timed futex wait, a relative sleep); their registers
    /// still hold the original call's arguments. Unchanged for any other wait or function.
    func continuing(wchan: String) -> ThreadWait {
        guard number == Self.restartSyscall, arguments.count == 6 else { return self }
        let function = wchan.split(separator: ".").first.map(String.init) ?? wchan
        let continued: Int
        switch function {
        case "poll_schedule_timeout", "do_sys_poll", "do_restart_poll": continued = 7
        case "futex_wait_queue", "futex_wait_queue_me", "futex_wait": continued = 202
        case "do_nanosleep", "hrtimer_nanosleep": continued = arguments[0] < 16 && arguments[1] <= 1 ? 230 : 35
        default: return self
        }
        var wait = self
        wait.number = continued
        wait.restarted = true
        return wait
    }

    /// Parses the file's one line: `"202 0x… 0x… … sp pc"`, `"-1 sp pc"` (user space) or `"running"`.
    package init?(line: String) {
        let parts = line.split(whereSeparator: { $0 == " " || $0 == "\n" })
        guard let first = parts.first else { return nil }
        if first == "running" {
            self.init(number: nil)
            return
        }
        guard let number = Int(first) else { return nil }
        let values = parts.dropFirst().map { UInt64(hexAddress: String($0)) ?? 0 }
        guard number >= 0 else {
            self.init(number: nil, stackPointer: values.first ?? 0, programCounter: values.dropFirst().first ?? 0)
            return
        }
        guard values.count >= 8 else { return nil }
        self.init(
            number: number, arguments: Array(values.prefix(6)), stackPointer: values[6], programCounter: values[7])
    }

    /// Reads `/proc/<pid>/task/<tid>/syscall`; nil when it cannot be read.
    package static func read(pid: Int32, tid: Int32) -> ThreadWait? {
        ProcDirectory(processID: pid, threadID: tid).syscall()
    }

    /// In a system call (blocked or about to be).
    var inSyscall: Bool { number != nil }

    /// The call as the thread sees it: `restart_syscall` (219) continues the call a stop interrupted (a timed
    /// futex wait, a sleep), at the same stack pointer and program counter — whether or not the call it continues
    /// is known (``continuing(wchan:)``).
    var isRestart: Bool { restarted || number == Self.restartSyscall }

    /// What the call waits on, from its arguments: the epoll descriptor, the poll array and its length, the
    /// select sets, the futex word. Two waits at the same call site that differ here wait for different things.
    package var target: [UInt64] {
        guard let number, arguments.count == 6 else { return [] }
        switch number {
        case 232, 281, 441, 426: return [arguments[0]]  // epoll_wait, epoll_pwait, epoll_pwait2, io_uring_enter
        case 7, 271: return [arguments[0], arguments[1]]  // poll, ppoll: fds, nfds
        case 23, 270: return Array(arguments.prefix(4))  // select, pselect6: nfds and the three sets
        case 202, 449: return [arguments[0]]  // futex word; futex_waitv array
        case 34, 130, 128, 219: return []  // pause, rt_sigsuspend, rt_sigtimedwait, restart_syscall
        default: return [arguments[0]]
        }
    }

    /// The file descriptor the call works on, for a call whose first argument is one (a read or write, `fsync`,
    /// `close`, `ftruncate`, a socket call …); nil for any other call, and for a wait on a set of descriptors.
    package var descriptor: UInt64? {
        guard let number, arguments.count == 6 else { return nil }
        switch number {
        // read, write, close, fstat, lseek, ioctl, pread64, pwrite64, readv, writev, sendfile (out), connect,
        // accept, sendto, recvfrom, sendmsg, recvmsg, shutdown, fcntl, flock, fsync, fdatasync, ftruncate,
        // getdents64, splice (in), sync_file_range, fallocate, accept4, preadv, pwritev, recvmmsg, sendmmsg,
        // copy_file_range (in), preadv2, pwritev2
        case 0, 1, 3, 5, 8, 16, 17, 18, 19, 20, 40, 42, 43, 44, 45, 46, 47, 48, 72, 73, 74, 75, 77, 217, 275, 277,
            285, 288, 295, 296, 299, 307, 326, 327, 328:
            return arguments[0]
        default: return nil
        }
    }

    /// A futex wait with no timeout that is not glibc's contended-mutex wait (a condition variable, a semaphore,
    /// a runtime's parking word): such a call ends only when another thread wakes it (or a signal arrives), so a
    /// thread seen in it again after sleeping again was woken and came back, whereas a timed wait can wake itself
    /// to re-check, and a mutex waiter that lost the lock to another thread sleeps again in the same acquisition.
    var isWakeOnlyFutexWait: Bool {
        guard number == 202, arguments.count == 6 else { return false }
        let op = arguments[1] & 0x7f
        return (op == 0 || op == 9) && arguments[3] == 0 && arguments[2] != 2  // FUTEX_WAIT(_BITSET), no timeout
    }

    /// The class of the call, judged by its content as well as its number: a `select` or `poll` that waits on no
    /// descriptor is a sleep.
    package var kind: SyscallTable.Kind? {
        guard let number else { return nil }
        let sets = arguments.count == 6
        switch number {
        case 7 where sets && (arguments[1] == 0 || arguments[0] == 0): return .sleep
        case 271 where sets && (arguments[1] == 0 || arguments[0] == 0): return .sleep
        case 23 where sets && (arguments[0] == 0 || arguments[1...3].allSatisfy { $0 == 0 }): return .sleep
        case 270 where sets && (arguments[0] == 0 || arguments[1...3].allSatisfy { $0 == 0 }): return .sleep
        // A file lock waited for: flock without LOCK_NB, fcntl F_SETLKW (7) or F_OFD_SETLKW (38).
        case 73 where sets && arguments[1] & 4 == 0: return .lock
        // A SysV semaphore operation waited on (semop, semtimedop).
        case 65, 220: return .lock
        case 72 where sets && (arguments[1] == 7 || arguments[1] == 38): return .lock
        default: return SyscallTable.kind(number)
        }
    }

    /// The same call at the same place as `other`, waiting on the same thing: the thread did not leave it
    /// between the two looks (or left and came back to an identical call, which counters may still tell).
    /// A `restart_syscall` matches the call it continues (same stack pointer and program counter).
    func isSameCall(as other: ThreadWait) -> Bool {
        guard inSyscall, other.inSyscall, stackPointer == other.stackPointer,
            Self.sameWrapper(programCounter, other.programCounter)
        else { return false }
        if isRestart || other.isRestart { return true }
        return number == other.number && arguments == other.arguments
    }

    /// Two system-call instructions of one libc wrapper: glibc's cancellable calls take one path while the
    /// process has one thread and another once it has more, a few dozen bytes apart.
    static func sameWrapper(_ a: UInt64, _ b: UInt64) -> Bool { (a > b ? a - b : b - a) < 512 }
}
