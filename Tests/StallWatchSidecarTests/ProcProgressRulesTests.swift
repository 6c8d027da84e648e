// What counts as progress of a thread seen from /proc: leaving a call, not counters moving inside one.
import Testing

@testable import StallWatch
@testable import StallWatchSidecar

@Suite struct ProcProgressRulesTests {
    static let fsync = ThreadWait(
        number: 74, arguments: [5, 0, 0, 0, 0, 0], stackPointer: 0x7ffe_1000, programCounter: 0x7f00)
    static let read = ThreadWait(
        number: 0, arguments: [6, 0x5000, 4096, 0, 0, 0], stackPointer: 0x7ffe_1000, programCounter: 0x7f10)
    static let userSpace = ThreadWait(number: nil)
    static let none: [UInt64] = [0, 0, 0]

    static func progress(
        _ before: ThreadWait?, _ after: ThreadWait?, _ old: [UInt64], _ new: [UInt64], allowance: [UInt64] = none
    ) -> Bool {
        ProcProgressProbe.isProgress(from: before, to: after, counters: old, new, allowance: allowance)
    }

    @Test func voluntarySwitchesInsideOneLongFsyncAreNotProgress() {
        #expect(!Self.progress(Self.fsync, Self.fsync, [10, 3, 7], [25, 3, 7]))
    }

    @Test func leavingTheCallIsProgress() {
        #expect(Self.progress(Self.fsync, Self.userSpace, [10, 3, 7], [11, 3, 8]))
        #expect(Self.progress(Self.fsync, Self.read, [10, 3, 7], [11, 3, 8]))
    }

    static func call(_ number: Int, fd: UInt64) -> ThreadWait {
        ThreadWait(number: number, arguments: [fd, 0, 0, 0, 0, 0], stackPointer: 0x7ffe_1000, programCounter: 0x7f30)
    }

    @Test func goingStraightFromOneCallOnAFileToTheNextOnTheSameFileIsNotProgress() {
        let write = Self.call(1, fd: 5)
        let close = Self.call(3, fd: 5)
        // fsync, then close of the same file; a write just completed, then its fsync.
        #expect(!Self.progress(Self.fsync, close, [10, 3, 7], [14, 3, 7]))
        #expect(!Self.progress(write, Self.fsync, [10, 3, 7], [11, 3, 8]))
        // Another descriptor, or other reads and writes in between: the thread did other work.
        #expect(Self.progress(Self.fsync, Self.call(3, fd: 6), [10, 3, 7], [11, 3, 7]))
        #expect(Self.progress(Self.fsync, close, [10, 3, 7], [11, 6, 7]))
        #expect(Self.progress(write, Self.fsync, [10, 3, 7], [11, 3, 10]))
        // A read that completed, then another read of the same descriptor into another buffer: a new read.
        let nextRead = ThreadWait(
            number: 0, arguments: [6, 0x6000, 4096, 0, 0, 0], stackPointer: 0x7ffe_1000, programCounter: 0x7f10)
        #expect(Self.progress(Self.read, nextRead, [10, 3, 7], [11, 4, 7]))
        // A wait on a set of descriptors names none.
        #expect(Self.call(232, fd: 5).descriptor == nil && close.descriptor == 5)
    }

    @Test func theReadACaptureRestartsIsDiscountedButAnotherCompletedReadIsNot() {
        let capture: [UInt64] = [2, 1, 1]
        #expect(!Self.progress(Self.read, Self.read, [10, 3, 7], [12, 4, 7], allowance: capture))
        #expect(Self.progress(Self.read, Self.read, [10, 3, 7], [12, 5, 7], allowance: capture))
        #expect(Self.progress(Self.read, Self.read, [10, 3, 7], [10, 4, 7]))
    }

    @Test func aThreadSeenOutsideItsCallJustAfterACaptureHasNotLeftIt() {
        #expect(!Self.progress(Self.read, Self.userSpace, [10, 3, 7], [12, 4, 7], allowance: [2, 1, 1]))
    }

    @Test func aThreadInUserSpaceProgressesOnlyBySystemCalls() {
        #expect(!Self.progress(Self.userSpace, Self.userSpace, [10, 3, 7], [10, 3, 7]))
        #expect(!Self.progress(Self.userSpace, Self.userSpace, [10, 3, 7], [12, 3, 7], allowance: [2, 1, 1]))
        #expect(Self.progress(Self.userSpace, Self.userSpace, [10, 3, 7], [11, 3, 7]))
        // Entering the call it now blocks in is not progress by itself.
        #expect(!Self.progress(Self.userSpace, Self.fsync, [10, 3, 7], [11, 3, 7]))
        #expect(Self.progress(Self.userSpace, Self.fsync, [10, 3, 7], [11, 3, 9]))
    }

    static func futex(op: UInt64, value: UInt64, timeout: UInt64) -> ThreadWait {
        ThreadWait(
            number: 202, arguments: [0x5555_1000, op, value, timeout, 0, 0], stackPointer: 0x7ffe_1000,
            programCounter: 0x7f20)
    }

    @Test func sleepingAgainInAWaitOnlyAnotherThreadEndsIsProgressButNotInATimedOrMutexWait() {
        // sem_wait or a condition variable with no timeout: woken by another thread, back in the same call.
        let park = Self.futex(op: 0x189, value: 0, timeout: 0)
        #expect(park.isWakeOnlyFutexWait)
        #expect(Self.progress(park, park, [10, 3, 7], [11, 3, 7]))
        #expect(!Self.progress(park, park, [10, 3, 7], [10, 3, 7]))
        #expect(!Self.progress(park, park, [10, 3, 7], [12, 3, 7], allowance: [2, 1, 1]), "a capture's switches")
        // A timed wait re-checks on its own; a mutex waiter that lost the lock again is still acquiring it.
        let timed = Self.futex(op: 0x189, value: 0, timeout: 0x7ffe_2000)
        let mutex = Self.futex(op: 0x80, value: 2, timeout: 0)
        #expect(!timed.isWakeOnlyFutexWait && !mutex.isWakeOnlyFutexWait)
        #expect(!Self.progress(timed, timed, [10, 3, 7], [15, 3, 7]))
        #expect(!Self.progress(mutex, mutex, [10, 3, 7], [15, 3, 7]))
    }
}
