// The classic service stalls, each in a non-inlined function named after what the loop is stuck doing.
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The stall kinds `POST /stall/{kind}` injects into the service.
enum ServiceStallKind: String, CaseIterable, Sendable {
    /// Synchronous disk writes with fsync on the loop.
    case io
    /// A full re-sort and filter of a huge session list on the loop.
    case sort
    /// The loop needs the lock a background database writer holds for a long write.
    case lock
    /// Two locks taken in opposite orders by the loop and a worker (broken by the worker's timed lock).
    case deadlock
    /// A non-reentrant lock re-entered from an enumeration callback (broken by a timed lock).
    case reentrant

    /// The function a report's samples name when this stall happens on the loop.
    var function: String {
        switch self {
        case .io: "writeJournalSynchronously"
        case .sort: "resortHugeSessionList"
        case .lock: "waitForDatabaseWriterLock"
        case .deadlock: "lockSessionsThenIndex"
        case .reentrant: "reenterSessionLockFromEnumeration"
        }
    }
}

/// The stalls themselves, as the unremedied service commits them. Each blocks the calling thread (the loop) for
/// about `durationMs` and then recovers, so the process lives on.
enum ServiceStalls {
    /// Synchronous journal writes, each followed by fsync, until the time is up.
    @inline(never)
    static func writeJournalSynchronously(fd: Int32, durationMs: Int) {
        // Small writes: the time goes to fsync (in the kernel, waiting for the disk), as with a journal.
        let block = [UInt8](repeating: 0x6a, count: 16 << 10)
        let end = deadline(durationMs)
        writeAndSync(fd: fd, block: block, until: end, cap: 32 << 20)
    }

    /// Re-sorts and filters the whole huge session list, again and again, until the time is up.
    @inline(never)
    static func resortHugeSessionList(_ sessions: [Session], durationMs: Int) -> Int {
        let end = deadline(durationMs)
        var visible = 0
        repeat {
            visible = SessionStore.sortedVisible(sessions).count
        } while DispatchTime.now().uptimeNanoseconds < end
        return visible
    }

    /// Inserts a row under the database lock while the writer thread holds it for a long write.
    @inline(never)
    static func waitForDatabaseWriterLock(_ database: DatabaseWriter, durationMs: Int) {
        database.beginLongWrite(ms: durationMs)
        database.insertHoldingLock("stall")  // blocks in pthread_mutex_lock until the long write ends
    }

    /// The loop takes the sessions lock then the index lock; a worker takes them in the opposite order. Neither
    /// can proceed until the worker's timed lock gives up after `durationMs` and releases the index lock.
    @inline(never)
    static func lockSessionsThenIndex(durationMs: Int) {
        let sessionsLock = TimedMutex()
        let indexLock = TimedMutex()
        let workerHoldsIndex = DispatchSemaphore(value: 0)
        let loopHoldsSessions = DispatchSemaphore(value: 0)
        let worker = Thread {
            indexLock.lock()
            workerHoldsIndex.signal()
            loopHoldsSessions.wait()
            if sessionsLock.lock(timeoutMs: durationMs) { sessionsLock.unlock() }  // gives up: breaks the cycle
            indexLock.unlock()
        }
        worker.name = "demo-index-worker"
        worker.start()
        workerHoldsIndex.wait()
        sessionsLock.lock()
        loopHoldsSessions.signal()
        indexLock.lock()  // the deadlock: the loop waits here until the worker gives up
        indexLock.unlock()
        sessionsLock.unlock()
    }

    /// Enumerates the session list under its (non-reentrant) lock; the callback asks the list for its count,
    /// which takes the same lock again on the same thread: a self-deadlock, broken by a timed lock.
    @inline(never)
    static func reenterSessionLockFromEnumeration(_ list: LockedSessionList, durationMs: Int) -> Int {
        var counted = 0
        list.forEachLocked { _ in
            counted = list.count(waitingAtMostMs: durationMs) ?? -1
            return false
        }
        return counted
    }

    private static func deadline(_ durationMs: Int) -> UInt64 {
        DispatchTime.now().uptimeNanoseconds + UInt64(durationMs) * 1_000_000
    }
}

/// A session list behind a plain (non-reentrant) pthread mutex, the way it is often first written.
final class LockedSessionList: @unchecked Sendable {  // ids: guarded by lock
    private let lock = TimedMutex()
    private var ids: [Int]

    init(ids: [Int]) { self.ids = ids }

    /// Calls `body` for each id while holding the lock, until it returns false.
    func forEachLocked(_ body: (Int) -> Bool) {
        lock.lock()
        defer { lock.unlock() }
        for id in ids where !body(id) { break }
    }

    /// The count, or nil if the lock was not free within `waitingAtMostMs`.
    func count(waitingAtMostMs: Int) -> Int? {
        guard lock.lock(timeoutMs: waitingAtMostMs) else { return nil }
        defer { lock.unlock() }
        return ids.count
    }
}
