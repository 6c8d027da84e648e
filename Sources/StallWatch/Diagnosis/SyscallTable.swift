// x86_64 system call numbers StallWatch needs to name, and how it classifies them.

/// Names and classes of the x86_64 system calls a stuck or idle thread is typically in.
public enum SyscallTable {
    /// What a thread blocked in a system call is waiting for.
    public enum Kind: String, Sendable {
        /// Waiting for events: the loop's idle wait (epoll_wait, poll, select, io_uring_enter …).
        case idleWait
        /// A futex: a lock, condition variable or semaphore.
        case lock
        /// File or socket I/O, or forcing data to disk.
        case io
        /// A deliberate sleep.
        case sleep
        case other
    }

    static let names: [Int: String] = [
        0: "read", 1: "write", 2: "open", 3: "close", 4: "stat", 5: "fstat", 7: "poll", 8: "lseek", 9: "mmap",
        10: "mprotect", 11: "munmap", 16: "ioctl", 17: "pread64", 18: "pwrite64", 19: "readv", 20: "writev",
        23: "select", 24: "sched_yield", 26: "msync", 34: "pause", 35: "nanosleep", 40: "sendfile", 42: "connect",
        43: "accept", 44: "sendto", 45: "recvfrom", 46: "sendmsg", 47: "recvmsg", 56: "clone", 57: "fork",
        59: "execve", 61: "wait4", 62: "kill", 72: "fcntl", 73: "flock", 74: "fsync", 75: "fdatasync",
        76: "truncate", 77: "ftruncate", 82: "rename", 83: "mkdir", 87: "unlink", 101: "ptrace", 130: "rt_sigsuspend",
        128: "rt_sigtimedwait", 162: "sync", 187: "readahead", 200: "tkill", 202: "futex", 213: "epoll_create",
        230: "clock_nanosleep", 232: "epoll_wait", 234: "tgkill", 247: "waitid", 257: "openat", 262: "newfstatat",
        270: "pselect6", 271: "ppoll", 277: "sync_file_range", 281: "epoll_pwait", 285: "fallocate", 288: "accept4",
        295: "preadv", 296: "pwritev", 299: "recvmmsg", 306: "syncfs", 307: "sendmmsg", 310: "process_vm_readv",
        319: "memfd_create", 322: "execveat", 327: "preadv2", 328: "pwritev2", 332: "statx", 426: "io_uring_enter",
        435: "clone3", 441: "epoll_pwait2", 449: "futex_waitv",
    ]

    /// The name of system call `number`, or `syscall_<n>`.
    public static func name(_ number: Int) -> String { names[number] ?? "syscall_\(number)" }

    public static func kind(_ number: Int) -> Kind {
        switch number {
        case 7, 23, 232, 270, 271, 281, 426, 441, 34, 130, 128: return .idleWait
        case 202, 449: return .lock
        case 35, 230: return .sleep
        case 0, 1, 17, 18, 19, 20, 26, 40, 42, 43, 44, 45, 46, 47, 73, 74, 75, 76, 77, 162, 187, 257, 262, 277, 285,
            288, 295, 296, 299, 306, 307, 327, 328, 332, 2, 4, 82, 83, 87:
            return .io
        default: return .other
        }
    }
}
