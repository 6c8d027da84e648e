// RecordedHolder: the thread a lock's own structure or the lock book records, for locks whose word names no owner.
import CStallWatchCore

/// Finds the holder a process records beside a lock that keeps no owner in its futex word: a runtime's reentrant
/// lock or monitor that wraps a semaphore or condition and keeps the owning thread's handle (`pthread_self()`) in
/// a field of its own — CPython's `threading.RLock` (the lock of every `logging` handler), and any lock written
/// the same way.
///
/// A thread's handle on x86_64 is the address of its control block, which the ABI makes point to itself (the
/// thread pointer's first word holds the thread pointer; glibc's `header.self`, two words on, too): a word that is
/// such an address is a thread's handle, whatever structure holds it, and the control block holds the thread's
/// id. The structure is looked for where the waiting code keeps it: among the objects the waiting thread's stack
/// points to (the lock's address, spilled, or saved with the registers of the calls below), one that holds the
/// futex word (a lock with its primitive inline) or points to it (a lock that points to its primitive, as
/// CPython's does). Never in the memory merely next to the word: a heap neighbour may hold any thread's handle.
/// A process that preloaded the lock book (``LockBook``) says more directly which thread last took a semaphore it
/// did not post since: that record comes first.
/// The finding is a likely holder, not proof: the structure's meaning is inferred from its words, and a record can
/// lag a release by a few instructions.
package enum RecordedHolder {
    package struct Finding: Sendable, Hashable {
        package var threadID: Int32
        /// The futex word waited on.
        var lockWord: UInt64
        var record: Record

        /// What recorded the holder.
        package enum Record: Sendable, Hashable {
            /// An object the waiting thread's stack points to, that holds or points to the lock word, holds the
            /// thread's handle at `handleAddress`.
            case structure(handleAddress: UInt64, structureAddress: UInt64)
            /// The lock book the process preloaded (``LockBook``): the last thread to take the semaphore.
            case lockBook
        }

        /// The object that recorded the holder, for a holder read from the lock's structure.
        var structureAddress: UInt64? {
            if case .structure(_, let structure) = record { return structure }
            return nil
        }

        /// Who recorded it, for the evidence ("the lock's own structure records thread N as holding it").
        package var recorder: String {
            if case .lockBook = record { return "the process's lock book" }
            return "the lock's own structure"
        }

        /// How it was found, for the evidence.
        package var how: String {
            guard case .structure(let handleAddress, let structure) = record else {
                return
                    "it was the last to take the semaphore at 0x\(String(lockWord, radix: 16)) and has not posted it "
                    + "since (\(LockBook.libraryName), preloaded)"
            }
            let at = "0x" + String(structure, radix: 16)
            let handle = "at +\(handleAddress &- structure), this thread's handle (pthread_self)"
            guard lockWord >= structure, lockWord - structure < UInt64(RecordedHolder.structureBytes) else {
                return
                    "the object at \(at) that the waiting thread's stack points to holds the lock word's address and, "
                    + handle
            }
            return "the structure at \(at) that the waiting thread's stack points to holds the lock word at "
                + "+\(lockWord - structure) and, \(handle)"
        }
    }

    /// Bytes of the waiting thread's stack scanned for pointers to the lock's structure, from its stack pointer.
    static let stackBytes = 4096
    /// Bytes read of each object the stack points to: a lock's own fields come first (a semaphore, 32 bytes, and an
    /// owner after it fit), and reading further reaches into whatever the allocator put next.
    static let structureBytes = 48
    /// Bytes of a control block searched for the thread's id (glibc keeps `tid` at +720 on x86_64).
    static let controlBlockBytes = 1536

    /// The thread (of `threads`, not `waiter`) recorded by the structure of the lock `waiter` waits for in `wait`,
    /// a futex wait whose word names no owner; nil when no structure records exactly one such thread.
    package static func find(pid: Int32, waiter: Int32, wait: ThreadWait, threads: Set<Int32>) -> Finding? {
        guard wait.number == 202, wait.arguments.count == 6 else { return nil }
        let futex = wait.arguments[0]
        guard futex >= 4096, futex % 4 == 0 else { return nil }
        // A process that preloaded the lock book recorded who took the semaphore last.
        if let taker = LockBook.taker(pid: pid, address: futex), taker != waiter, threads.contains(taker) {
            return Finding(threadID: taker, lockWord: futex, record: .lockBook)
        }
        var reader = Reader(pid: pid, threads: threads.subtracting([waiter]))
        // Structures the waiting thread's stack points to (the lock's address, spilled or saved with the registers
        // of the calls below) that hold the lock word or point to it.
        guard wait.stackPointer >= 4096 else { return nil }
        let stack = reader.words(at: wait.stackPointer & ~7, count: stackBytes / 8)
        let span = UInt64(structureBytes)
        var seen = Set<UInt64>()
        var findings: [Finding] = []
        for pointer in stack where isUserPointer(pointer) && seen.insert(pointer).inserted {
            if seen.count > 512 { break }
            let holdsWord = pointer <= futex && futex - pointer < span
            let object = reader.words(at: pointer, count: structureBytes / 8)
            guard holdsWord || object.contains(where: { $0 != 0 && $0 <= futex && futex - $0 < span }),
                let found = reader.recorded(words: object, at: pointer, skipping: futex & ~7)
            else { continue }
            findings.append(
                Finding(
                    threadID: found.thread, lockWord: futex,
                    record: .structure(handleAddress: pointer + UInt64(found.offset), structureAddress: pointer)))
        }
        // Several objects (a wrapper and its inner lock, an object and its neighbour) must agree on the thread; the
        // one told is the structure whose handle is nearest its start.
        guard let first = findings.first, findings.allSatisfy({ $0.threadID == first.threadID }) else { return nil }
        func handleOffset(_ finding: Finding) -> UInt64 {
            guard case .structure(let handle, let structure) = finding.record else { return 0 }
            return handle &- structure
        }
        return findings.min { handleOffset($0) < handleOffset($1) }
    }

    /// A cycle of lock waits through recorded holders: from `holder` (recorded by the lock `loop` waits for), each
    /// thread blocked on a futex lock whose owner its word or its structure records, back to `loop`. Returns the
    /// threads from `loop` on, or nil when the chain ends, leaves the process's threads or runs past 8 threads.
    package static func cycle(pid: Int32, loop: Int32, holder: Int32, threads: Set<Int32>) -> [Int32]? {
        var chain = [loop]
        var next: Int32? = holder
        while let tid = next, chain.count <= 8 {
            if tid == loop { return chain }
            guard !chain.contains(tid), let probe = ThreadProbe.read(pid: pid, tid: tid), probe.syscallKind == .lock,
                let wait = probe.wait
            else { return nil }
            chain.append(tid)
            next =
                LockOwner.owner(pid: pid, wait: wait, threads: threads)?.threadID
                ?? find(pid: pid, waiter: tid, wait: wait, threads: threads)?.threadID
        }
        return nil
    }

    private static func isUserPointer(_ value: UInt64) -> Bool {
        value >= 0x10000 && value < 0x8000_0000_0000 && value % 8 == 0
    }

    /// Reads the target's memory, remembering which addresses are control blocks of which thread.
    private struct Reader {
        let pid: Int32
        let threads: Set<Int32>
        var controlBlocks: [UInt64: Int32?] = [:]

        init(pid: Int32, threads: Set<Int32>) {
            self.pid = pid
            self.threads = threads
        }

        /// The words at `address`, fewer (or none) where the memory ends or is unreadable.
        func words(at address: UInt64, count: Int) -> [UInt64] {
            var buffer = [UInt64](repeating: 0, count: count)
            let n = buffer.withUnsafeMutableBytes { sw_read_memory(pid, address, $0.baseAddress, UInt(count * 8)) }
            guard n > 0 else { return [] }
            return Array(buffer.prefix(n / 8))
        }

        /// The one thread whose handle the words (read at `address`) hold, with its offset, the word at `skipping`
        /// (the lock word's) left out; nil for none or several.
        mutating func recorded(
            words object: [UInt64], at address: UInt64, skipping: UInt64
        ) -> (thread: Int32, offset: Int)? {
            var found: (thread: Int32, offset: Int)?
            for (index, word) in object.enumerated()
            where isUserPointer(word) && word != address && address + UInt64(index * 8) != skipping {
                guard let thread = thread(controlBlock: word) else { continue }
                if let earlier = found, earlier.thread != thread { return nil }
                if found == nil { found = (thread, index * 8) }
            }
            return found
        }

        /// The thread whose control block is at `address`: its first and third words point to itself, and exactly
        /// one of the process's thread ids is in it.
        mutating func thread(controlBlock address: UInt64) -> Int32? {
            if let known = controlBlocks[address] { return known }
            var result: Int32?
            let header = words(at: address, count: 3)
            if header.count == 3, header[0] == address, header[2] == address {
                var block = [UInt32](repeating: 0, count: controlBlockBytes / 4)
                let n = block.withUnsafeMutableBytes {
                    sw_read_memory(pid, address, $0.baseAddress, UInt(controlBlockBytes))
                }
                let ids = Set(
                    block.prefix(max(0, n) / 4).dropFirst(6).map { Int32(bitPattern: $0) }.filter(threads.contains))
                if ids.count == 1 { result = ids.first }
            }
            controlBlocks[address] = result
            return result
        }
    }
}
