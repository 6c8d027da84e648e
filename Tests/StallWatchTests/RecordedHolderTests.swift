// RecordedHolder reads the holder a lock records in a structure of its own, in this process, with real threads.
import Dispatch
import Foundation
import StallWatchTestSupport
import Testing

@testable import StallWatch

/// A reentrant lock as runtimes write it: a POSIX semaphore and, beside it, the owning thread's `pthread_self()`.
/// `inline` keeps the semaphore in the structure; otherwise the structure points to one allocated apart.
private final class OwnedSemaphoreLock: @unchecked Sendable {
    // Layout of the raw structure: [owner handle][count][semaphore pointer], then the inline semaphore.
    let raw = UnsafeMutableRawPointer.allocate(byteCount: 64, alignment: 16)
    let separate = UnsafeMutablePointer<sem_t>.allocate(capacity: 1)
    let inline: Bool

    init(inline: Bool) {
        self.inline = inline
        raw.initializeMemory(as: UInt8.self, repeating: 0, count: 64)
        sem_init(semaphore, 0, 1)
        raw.storeBytes(of: UInt(bitPattern: semaphore), toByteOffset: 16, as: UInt.self)
    }

    deinit {
        sem_destroy(semaphore)
        raw.deallocate()
        separate.deallocate()
    }

    var semaphore: UnsafeMutablePointer<sem_t> {
        inline ? (raw + 24).bindMemory(to: sem_t.self, capacity: 1) : separate
    }

    /// Takes the lock, recording the caller as its owner when `record`.
    @inline(never) func acquire(record: Bool) {
        let structure = raw
        while sem_wait(semaphore) != 0 {}
        if record { structure.storeBytes(of: pthread_self(), as: UInt.self) }
        withExtendedLifetime(structure) {}
    }

    func release() {
        raw.storeBytes(of: 0, as: UInt.self)
        sem_post(semaphore)
    }
}

@Suite(.offPool) struct RecordedHolderTests {
    /// A holder thread takes `lock` (recording itself when `record`), a waiter blocks on it; returns what
    /// RecordedHolder finds from the waiter's wait, with the holder's and the waiter's ids.
    private func findWhileHeld(
        _ lock: OwnedSemaphoreLock, record: Bool, recordWaiter: Bool = false
    ) throws -> (found: RecordedHolder.Finding?, holder: Int32, waiter: Int32) {
        try StallWatchTestSupport.findWhileHeld(
            lockWord: UInt64(UInt(bitPattern: lock.semaphore)), take: { lock.acquire(record: record) },
            release: { lock.release() },
            block: {
                // A structure that records the waiter (a "last waiter" field): not a holder.
                if recordWaiter { lock.raw.storeBytes(of: pthread_self(), as: UInt.self) }
                lock.acquire(record: false)
            }, after: { lock.release() })
    }

    @Test(.timeLimit(.minutes(1)))
    func aHolderRecordedInAStructureThatPointsToTheSemaphoreIsFoundThroughTheWaitersStack() throws {
        let lock = OwnedSemaphoreLock(inline: false)
        let (found, holder, _) = try findWhileHeld(lock, record: true)
        #expect(found?.threadID == holder, "\(String(describing: found))")
        #expect(found?.structureAddress == UInt64(UInt(bitPattern: lock.raw)))
        #expect(found?.how.contains("+0, this thread's handle") == true, "\(found?.how ?? "")")
    }

    @Test(.timeLimit(.minutes(1)))
    func aHolderRecordedBesideAnInlineSemaphoreIsFound() throws {
        let lock = OwnedSemaphoreLock(inline: true)
        let (found, holder, _) = try findWhileHeld(lock, record: true)
        #expect(found?.threadID == holder, "\(String(describing: found))")
        #expect(found?.structureAddress == UInt64(UInt(bitPattern: lock.raw)))
        #expect(
            found?.how.contains("the lock word at +24 and, at +0, this thread's handle") == true, "\(found?.how ?? "")")
    }

    @Test(.timeLimit(.minutes(1)), arguments: [false, true])
    func aLockThatRecordsNoHolderOrOnlyItsWaiterNamesNobody(inline: Bool) throws {
        let unrecorded = try findWhileHeld(OwnedSemaphoreLock(inline: inline), record: false)
        #expect(unrecorded.found == nil, "\(String(describing: unrecorded.found))")
        let waiterRecorded = try findWhileHeld(OwnedSemaphoreLock(inline: inline), record: false, recordWaiter: true)
        #expect(waiterRecorded.found == nil, "\(String(describing: waiterRecorded.found))")
    }

    @Test(.timeLimit(.minutes(1)))
    func twoLocksTakenCrosswiseThatRecordTheirHoldersCloseACycle() throws {
        let first = OwnedSemaphoreLock(inline: false)
        let second = OwnedSemaphoreLock(inline: true)
        let a = HolderTID()
        let b = HolderTID()
        let aHas = DispatchSemaphore(value: 0)
        let bHas = DispatchSemaphore(value: 0)
        let done = DispatchSemaphore(value: 0)
        func crosswise(
            _ me: HolderTID, _ mine: OwnedSemaphoreLock, _ theirs: OwnedSemaphoreLock, _ has: DispatchSemaphore,
            _ other: DispatchSemaphore
        ) {
            Thread {
                me.set(StallWatchTestSupport.currentThreadID())
                mine.acquire(record: true)
                has.signal()
                other.wait()
                theirs.acquire(record: false)
                theirs.release()
                mine.release()
                done.signal()
            }.start()
        }
        crosswise(a, first, second, aHas, bHas)
        crosswise(b, second, first, bHas, aHas)
        let pid = getpid()
        func inFutexWait(_ tid: HolderTID) -> Bool {
            tid.value != 0 && ProcDirectory(processID: pid, threadID: tid.value).syscall()?.number == 202
        }
        #expect(pollUntil { inFutexWait(a) && inFutexWait(b) })
        let threads = Set(ThreadProbe.threadIDs(pid: pid))
        // Another test's watchdog in this process may stop these threads for an all-thread snapshot as they are
        // read (a stopped thread is in no lock wait): the read is a look, which such captures wait for, made when
        // none of either thread is under way, and read again if one began under it all the same.
        func cycleRead() -> [Int32]? {
            for _ in 0..<1000 {
                guard let lookA = CaptureLedger.beginLook(processID: pid, threadID: a.value) else {
                    usleep(1_000)
                    continue
                }
                guard let lookB = CaptureLedger.beginLook(processID: pid, threadID: b.value) else {
                    CaptureLedger.endLook(processID: pid, threadID: a.value, begun: lookA)
                    usleep(1_000)
                    continue
                }
                let cycle = RecordedHolder.cycle(pid: pid, loop: a.value, holder: b.value, threads: threads)
                let overlappedA = CaptureLedger.endLook(processID: pid, threadID: a.value, begun: lookA)
                let overlappedB = CaptureLedger.endLook(processID: pid, threadID: b.value, begun: lookB)
                if !overlappedA, !overlappedB { return cycle }
            }
            return nil
        }
        let cycle = cycleRead()
        // A thread that is not blocked on a lock ends the chain: no cycle through this one.
        let broken = RecordedHolder.cycle(
            pid: pid, loop: a.value, holder: StallWatchTestSupport.currentThreadID(), threads: threads)
        // Break the deadlock from outside: one more unit on the first lock lets the second thread through.
        sem_post(first.semaphore)
        #expect(done.wait(timeout: .now() + 10) == .success && done.wait(timeout: .now() + 10) == .success)
        #expect(cycle == [a.value, b.value], "\(String(describing: cycle)) for \(a.value), \(b.value)")
        #expect(broken == nil)
    }
}
