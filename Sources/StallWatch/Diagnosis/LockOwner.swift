// Who holds the lock a thread waits for: read from the futex word and glibc's pthread_mutex_t.
import CStallWatchCore

/// Finds the owner of the lock behind a futex address, where the lock's layout makes it readable.
enum LockOwner {
    /// How the owner was found.
    enum Source: String, Sendable {
        /// A priority-inheritance futex word holds the owner's tid in its low 30 bits.
        case piFutexWord = "PI futex word"
        /// glibc's `pthread_mutex_t.__data.__owner` (4 bytes at +8 from the futex word on x86_64).
        case glibcMutexOwner = "glibc mutex __owner"
        /// glibc's `pthread_rwlock_t.__data.__cur_writer`: the thread holding a read-write lock for writing.
        case glibcRwlockWriter = "glibc rwlock __cur_writer"
    }

    /// The writer holding the glibc read-write lock a thread waits for at `futexAddress`, when it waits as a
    /// blocked reader (on `__wrphase_futex`, +8 in the lock) or writer (on `__writers_futex`, +12): both wait for
    /// the value 3 (a phase or lock word marked as waited for), and `__cur_writer` (+24) holds the writer's id
    /// while one holds it — nothing while readers do. The writer's hypothesis is tried first: the reader's
    /// `__cur_writer` offset, read from a writer's word, lands on `__shared` (0 or 1, and 1 is a thread id in a
    /// process that is PID 1), while the writer's offset, read from a reader's word, lands on padding (always 0).
    static func rwlockWriter(pid: Int32, futexAddress: UInt64, threads: Set<Int32>) -> Int32? {
        guard futexAddress % 4 == 0, futexAddress >= 12 else { return nil }
        var words: (UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32) = (0, 0, 0, 0, 0, 0, 0, 0)
        // From the lock's start as a writer's word (futex - 12) through `__cur_writer` as a reader's (futex + 16).
        let n = withUnsafeMutableBytes(of: &words) { sw_read_memory(pid, futexAddress - 12, $0.baseAddress, 32) }
        guard n == 32 else { return nil }
        // Writer's word at +12 of the lock: `__wrphase_futex` (a phase word, 0–3) before it, `__cur_writer` at +24.
        let asWriter = Int32(bitPattern: words.6)
        if words.2 <= 3, asWriter > 0, threads.contains(asWriter) { return asWriter }
        // Reader's word at +8: `__writers_futex` (0–3) after it, `__cur_writer` at +24.
        let asReader = Int32(bitPattern: words.7)
        if words.4 <= 3, asReader > 0, threads.contains(asReader) { return asReader }
        return nil
    }

    /// The thread of `threads` that owns the lock whose futex word is at `futexAddress` in process `pid`.
    ///
    /// Either layout is only trusted when the value read is one of the process's thread ids: a condition
    /// variable or semaphore at that address yields nil rather than a wrong owner.
    static func owner(pid: Int32, futexAddress: UInt64, threads: Set<Int32>) -> (
        threadID: Int32, source: Source
    )? {
        guard futexAddress != 0, futexAddress % 4 == 0 else { return nil }
        var words: (UInt32, UInt32, UInt32) = (0, 0, 0)
        let n = withUnsafeMutableBytes(of: &words) { sw_read_memory(pid, futexAddress, $0.baseAddress, 12) }
        guard n == 12 else { return nil }
        let piOwner = Int32(bitPattern: words.0 & 0x3fff_ffff)
        if piOwner > 0, threads.contains(piOwner) { return (piOwner, .piFutexWord) }
        let mutexOwner = Int32(bitPattern: words.2)
        if mutexOwner > 0, threads.contains(mutexOwner), words.0 != 0 { return (mutexOwner, .glibcMutexOwner) }
        return nil
    }

    /// The owner of the lock a thread waits for in `wait` (a `futex` call), taken only where the waiting code is
    /// a lock with an owner: a priority-inheritance lock (`FUTEX_LOCK_PI`), or a plain wait for the value 2
    /// (glibc's contended-mutex state). A `pthread_join` waits for the joined thread's id, a condition variable
    /// for a sequence number, a semaphore for 0: those words name no owner, whatever they hold.
    static func owner(pid: Int32, wait: ThreadWait, threads: Set<Int32>) -> (threadID: Int32, source: Source)? {
        guard wait.number == 202 || wait.number == 219, wait.arguments.count == 6 else { return nil }
        let op = wait.arguments[1] & 0x7f
        let isPI = op == 6 || op == 13  // FUTEX_LOCK_PI, FUTEX_LOCK_PI2
        let isMutexWait = (op == 0 || op == 9) && wait.arguments[2] == 2  // FUTEX_WAIT(_BITSET) for "contended"
        if (op == 0 || op == 9) && wait.arguments[2] == 3,
            let writer = rwlockWriter(pid: pid, futexAddress: wait.arguments[0], threads: threads)
        {
            return (writer, .glibcRwlockWriter)
        }
        guard isPI || isMutexWait else { return nil }
        guard let found = owner(pid: pid, futexAddress: wait.arguments[0], threads: threads) else { return nil }
        if isPI, found.source != .piFutexWord { return nil }
        return found
    }

    /// The other half of a likely deadlock over locks that record no owner, seen from /proc alone: `wait`, of
    /// thread `threadID`, is a futex wait with no timeout for a lock with no recorded owner (a semaphore such as
    /// CPython's `threading.Lock`, a runtime's own lock), and exactly one other thread of the process is in such
    /// a wait, on another word — the only thread that can hold what each waits for. The rule of
    /// ``CauseClassifier/likelyCycle(_:loopWaitAddress:)`` for a watcher with no stacks: "likely", never proof. A
    /// wait on a word that holds a live thread's id (`pthread_join`) is no lock wait. Nil when any of this fails.
    static func likelyCyclePartner(pid: Int32, threadID: Int32, wait: ThreadWait, threads: Set<Int32>) -> Int32? {
        func ownerlessLockWait(_ w: ThreadWait) -> Bool {
            guard w.inSyscall, w.isWakeOnlyFutexWait else { return false }
            if let expected = Int32(exactly: w.arguments[2]), threads.contains(expected) { return false }
            return owner(pid: pid, wait: w, threads: threads) == nil
        }
        guard ownerlessLockWait(wait) else { return nil }
        var others: [(threadID: Int32, word: UInt64)] = []
        for other in threads where other != threadID {
            guard let w = ProcDirectory(processID: pid, threadID: other).syscall(), ownerlessLockWait(w) else {
                continue
            }
            others.append((other, w.arguments[0]))
            if others.count > 1 { return nil }
        }
        guard let partner = others.first, partner.word != wait.arguments[0] else { return nil }
        return partner.threadID
    }
}
