// LockBook: reads the lock book a process preloaded — the last taker of each POSIX semaphore (sw_lock_book.h).
import Synchronization

/// The reading side of the lock book (`libStallWatchLockBook.so`, `Sources/CStallWatchLockBook`): a process that
/// preloaded it records, per POSIX semaphore, the thread that last took it and has not posted it since. A thread
/// blocked on a semaphore another thread took is likely waiting for that thread to post it.
///
/// The table is read from the process's memory (`process_vm_readv`, /proc/PID/mem), never with a stop; its address
/// is the library's exported `sw_lock_book`, found through the process's maps and the library file's dynamic symbol
/// table. The layout mirrors sw_lock_book.h (``LockBookTests`` checks it against the library itself); a table
/// whose header does not match is not read.
package enum LockBook {
    /// The library's file name, as the process maps it.
    package static let libraryName = "libStallWatchLockBook.so"
    static let symbol = "sw_lock_book"
    static let magic: UInt32 = 0x6B6F_6F42
    static let version: UInt32 = 1
    static let slotCount = 4096
    static let slotBytes = 16
    static let probes = 8
    static let headerBytes = 16

    /// The slot where the record of the semaphore at `address` starts its probe (`sw_lock_book_home`).
    static func home(_ address: UInt64) -> Int {
        Int(((address >> 3) &* 0x9E37_79B9_7F4A_7C15) >> 52) & (slotCount - 1)
    }

    /// The table's address in each process read so far, checked again by its header at every read. A process
    /// without one is looked at again each time (its maps read: it is asked only of a thread waiting on a lock that
    /// records no owner, once a sample), so one that opens the library later is found.
    private static let tables = Mutex<[Int32: UInt64]>([:])

    /// The address of `pid`'s table, nil when it did not preload the library (or its header is not this layout).
    static func table(pid: Int32) -> UInt64? {
        if let known = tables.withLock({ $0[pid] }), headerMatches(pid: pid, at: known) { return known }
        guard let found = DynamicSymbol.address(of: symbol, library: libraryName, pid: pid),
            headerMatches(pid: pid, at: found)
        else {
            tables.withLock { $0[pid] = nil }
            return nil
        }
        tables.withLock { table in
            if table.count > 64 { table.removeAll() }
            table[pid] = found
        }
        return found
    }

    private static func headerMatches(pid: Int32, at address: UInt64) -> Bool {
        guard let header = WaitDescriptors.memory(pid, address, headerBytes) else { return false }
        return header.loadLE(UInt32.self, at: 0) == magic && header.loadLE(UInt32.self, at: 4) == version
            && header.loadLE(UInt32.self, at: 8) == UInt32(slotCount)
            && header.loadLE(UInt32.self, at: 12) == UInt32(slotBytes)
    }

    /// The thread process `pid`'s lock book records as the last taker of the semaphore at `address` that has not
    /// posted it since; nil when the process keeps no lock book, or the semaphore has no such record.
    package static func taker(pid: Int32, address: UInt64) -> Int32? {
        guard address != 0, let table = table(pid: pid) else { return nil }
        let home = home(address)
        // The probe's slots, wrapping at the table's end as the writer's do.
        for step in 0..<probes {
            let index = (home + step) & (slotCount - 1)
            let slot = table &+ UInt64(headerBytes + index * slotBytes)
            guard let first = WaitDescriptors.memory(pid, slot, slotBytes) else { return nil }
            let seen = first.loadLE(UInt64.self, at: 0)
            if seen == 0 { return nil }
            guard seen == address else { continue }
            // Read again: the same address around the taker means the taker is this semaphore's.
            guard let again = WaitDescriptors.memory(pid, slot, 8), again.loadLE(UInt64.self, at: 0) == address
            else { return nil }
            let taker = Int32(bitPattern: first.loadLE(UInt32.self, at: 8))
            return taker > 0 ? taker : nil
        }
        return nil
    }
}
