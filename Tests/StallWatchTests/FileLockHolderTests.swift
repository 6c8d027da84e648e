import StallWatchTestSupport
// The holder of a file lock, read from /proc/locks by the file's device and inode.
import Testing

@testable import StallWatch

@Suite(.offPool) struct FileLockHolderTests {
    /// Device 8:1 (st_dev 0x801), inode 131090: a waiter's line, the waiter's own lock on another file, the holder.
    static let locks = """
        1: FLOCK  ADVISORY  WRITE 4242 08:01:999 0 EOF
        2: -> FLOCK  ADVISORY  WRITE 4242 08:01:131090 0 EOF
        2: FLOCK  ADVISORY  WRITE 5151 08:01:131090 0 EOF
        3: OFDLCK ADVISORY  WRITE -1 08:01:7 0 EOF
        """

    @Test func theHolderIsTheProcessListedWithTheLockOnTheSameFileNotAWaiter() {
        let holder = FileLockHolder.holder(in: Self.locks, device: 0x801, inode: 131090, waiter: 4242)
        #expect(holder?.processID == 5151)
        #expect(holder?.lock == "FLOCK WRITE")
    }

    @Test func aLockOnlyTheWaiterHoldsOrAnOFDLockNamesNoHolder() {
        #expect(FileLockHolder.holder(in: Self.locks, device: 0x801, inode: 999, waiter: 4242) == nil)
        #expect(FileLockHolder.holder(in: Self.locks, device: 0x801, inode: 7, waiter: 4242) == nil)
        #expect(FileLockHolder.holder(in: Self.locks, device: 0x802, inode: 131090, waiter: 4242) == nil)
    }

    @Test func anOFDLockIsListedAsHeldWithNoProcessForTheDescriptorSearch() {
        let held = FileLockHolder.heldLock(in: Self.locks, key: "08:01:7", waiter: 4242)
        #expect(held?.lock == "OFDLCK WRITE" && held?.processID == -1)
        #expect(FileLockHolder.lockKey(device: 0x801, inode: 7) == "08:01:7")
        #expect(FileLockHolder.heldLock(in: Self.locks, key: "08:01:999", waiter: 4242) == nil, "the waiter's own")
    }

    @Test func onlyBlockingFileLockCallsAreLockWaits() {
        func wait(_ number: Int, _ arg1: UInt64) -> ThreadWait {
            ThreadWait(number: number, arguments: [3, arg1, 0, 0, 0, 0], stackPointer: 1, programCounter: 1)
        }
        #expect(wait(73, 2).kind == .lock)  // flock(LOCK_EX)
        #expect(wait(73, 2 | 4).kind != .lock)  // LOCK_NB returns at once
        #expect(wait(72, 7).kind == .lock)  // F_SETLKW
        #expect(wait(72, 38).kind == .lock)  // F_OFD_SETLKW
        #expect(wait(72, 6).kind != .lock)  // F_SETLK does not wait
    }
}
