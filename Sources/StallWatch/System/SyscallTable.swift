// x86_64 system call numbers StallWatch needs to name, and how it classifies them.

/// Names and classes of the x86_64 system calls a stuck or idle thread is typically in.
package enum SyscallTable {
    /// What a thread blocked in a system call is waiting for.
    package enum Kind: String, Sendable {
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

    /// The system call a libc wrapper symbol makes (`__write`, `__GI___libc_write`, `fsync`, `ftruncate64`,
    /// `clock_nanosleep@GLIBC_2.2.5`, `__lll_lock_wait` …), or nil for any other function.
    ///
    /// `/proc/<pid>/task/<tid>/syscall` says "running" for a thread working inside a system call (copying a
    /// large write into the page cache): the innermost frame is then the better evidence.
    static func number(forWrapperSymbol symbol: String) -> Int? {
        var name = Substring(symbol)
        if let at = name.firstIndex(of: "@") { name = name[..<at] }
        if let space = name.firstIndex(of: " ") { name = name[..<space] }
        for prefix in ["__GI_", "__libc_", "__", "_"] {
            while name.hasPrefix(prefix) { name = name.dropFirst(prefix.count) }
        }
        if name.hasPrefix("libc_") { name = name.dropFirst(5) }
        let lockWaits: Set<Substring> = [
            "lll_lock_wait", "lll_lock_wait_private", "futex_abstimed_wait_common", "futex_abstimed_wait_common64",
            "pthread_mutex_lock_full", "futex_wait", "lll_timedlock_wait",
        ]
        if lockWaits.contains(name) { return 202 }
        if let number = byName[String(name)] { return number }
        if name.hasSuffix("64"), let number = byName[String(name.dropLast(2))] { return number }
        return nil
    }

    private static let byName: [String: Int] = Dictionary(names.map { ($1, $0) }, uniquingKeysWith: { a, _ in a })

    /// The name of system call `number`, or `syscall_<n>`.
    static func name(_ number: Int) -> String { names[number] ?? "syscall_\(number)" }

    /// Whether `name` is a wait for events on descriptors (poll, select, epoll, io_uring): an event loop's idle
    /// wait, as opposed to the other idle waits (a pause or a wait for signals).
    package static func isDescriptorEventWait(_ name: String) -> Bool {
        guard let number = byName[name] else { return false }
        return [7, 23, 232, 270, 271, 281, 426, 441].contains(number)
    }

    static func kind(_ number: Int) -> Kind {
        switch number {
        case 7, 23, 232, 270, 271, 281, 426, 441, 34, 130, 128: return .idleWait
        case 202, 449: return .lock
        case 35, 230: return .sleep
        // The reads and writes, syncs, truncations and file-system calls; and close, which can be long only as
        // file I/O (freeing the blocks of a deleted file, flushing a network file system's data).
        case 0, 1, 3, 17, 18, 19, 20, 26, 40, 42, 43, 44, 45, 46, 47, 73, 74, 75, 76, 77, 162, 187, 257, 262, 277,
            285, 288, 295, 296, 299, 306, 307, 327, 328, 332, 2, 4, 82, 83, 87:
            return .io
        default: return .other
        }
    }
}
