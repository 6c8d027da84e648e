import StallWatchTestSupport
// The idle-wait rules on /proc syscall lines: what a wait waits on, and which wait is the loop's own.
import Testing

@testable import StallWatch

@Suite(.offPool) struct IdleWaitLearnerTests {
    /// A `/proc/<pid>/task/<tid>/syscall` line.
    static func line(_ number: Int, _ args: [UInt64], sp: UInt64, pc: UInt64) -> ThreadWait {
        let padded = args + Array(repeating: 0, count: 6 - args.count)
        let text = ([String(number)] + (padded + [sp, pc]).map { "0x" + String($0, radix: 16) })
            .joined(separator: " ")
        return ThreadWait(line: text)!
    }

    static let epollWrapper: UInt64 = 0x7f00_0000_1234
    static func epoll(fd: UInt64, sp: UInt64 = 0x7ffe_1000, timeout: UInt64 = 1000) -> ThreadWait {
        line(232, [fd, 0x5555_0000, 64, timeout], sp: sp, pc: epollWrapper)
    }

    @Test func aSyscallLineGivesItsNumberArgumentsStackPointerAndProgramCounter() throws {
        let wait = try #require(ThreadWait(line: "202 0x55a0 0x80 0x2 0x0 0x0 0x0 0x7ffe10 0x7f12ab\n"))
        #expect(wait.number == 202)
        #expect(wait.arguments == [0x55a0, 0x80, 2, 0, 0, 0])
        #expect(wait.stackPointer == 0x7ffe10 && wait.programCounter == 0x7f12ab)
        #expect(wait.target == [0x55a0])
        #expect(ThreadWait(line: "running")?.inSyscall == false)
        #expect(ThreadWait(line: "-1 0x7ffe10 0x7f12ab")?.inSyscall == false)
        #expect(ThreadWait(line: "garbage") == nil)
    }

    @Test func aSelectOrPollOnNoDescriptorIsASleepNotAnEventWait() {
        #expect(Self.line(23, [0, 0, 0, 0, 0x7ffe_2000], sp: 1, pc: 2).kind == .sleep)
        #expect(Self.line(23, [4, 0x7ffe_3000, 0, 0, 0x7ffe_2000], sp: 1, pc: 2).kind == .idleWait)
        #expect(Self.line(7, [0, 0, 500], sp: 1, pc: 2).kind == .sleep)
        #expect(Self.line(271, [0x7ffe_3000, 2, 0x7ffe_2000], sp: 1, pc: 2).kind == .idleWait)
    }

    @Test func theFirstEventWaitIsLearnedAndItsLaterIterationsReadAsIdle() {
        var learner = IdleWaitLearner()
        var seen = false
        seen = learner.isIdle(Self.epoll(fd: 3))
        #expect(seen)
        seen = learner.isIdle(ThreadWait(number: nil))
        #expect(!seen)
        // The next iteration: another timeout, the same wait.
        seen = learner.isIdle(Self.epoll(fd: 3, timeout: 17))
        #expect(seen)
        #expect(learner.learned.count == 1)
    }

    @Test func aNestedEpollWaitFromTheSameCallSiteOnAnotherDescriptorIsBusy() {
        var learner = IdleWaitLearner()
        var seen = false
        seen = learner.isIdle(Self.epoll(fd: 3))
        #expect(seen)
        // An interpreter's nested selector: same syscall, stack pointer and program counter, another epoll fd.
        seen = learner.isIdle(Self.epoll(fd: 7))
        #expect(!seen)
        // A client's poll with a timeout, deeper in the stack.
        seen = learner.isIdle(Self.line(7, [0x7ffe_0800, 1, 5000], sp: 0x7ffe_0900, pc: 0x7f00_0000_2000))
        #expect(!seen)
    }

    @Test func theLoopsOwnEpollDescriptorFromAnotherStackDepthIsStillItsIdleWait() {
        var learner = IdleWaitLearner()
        var seen = learner.isIdle(Self.epoll(fd: 3, sp: 0x7ffe_1000))
        #expect(seen)
        // CPython's specialising interpreter reaches the same wait through fewer C frames once warm.
        seen = learner.isIdle(Self.epoll(fd: 3, sp: 0x7ffe_1070))
        #expect(seen)
    }

    @Test func aRestartedCallAtTheLearnedPlaceIsStillTheIdleWait() {
        var learner = IdleWaitLearner()
        var seen = false
        seen = learner.isIdle(Self.epoll(fd: 3))
        #expect(seen)
        seen = learner.isIdle(Self.line(219, [], sp: 0x7ffe_1000, pc: Self.epollWrapper))
        #expect(seen)
    }

    @Test func aFutexTheThreadIsInAtItsFirstLookIsItsIdleWait() {
        var learner = IdleWaitLearner()
        var seen = false
        let park = Self.line(202, [0x5555_1000, 0x89, 0], sp: 0x7ffe_1000, pc: 0x7f00_0000_3000)
        seen = learner.isIdle(park)
        #expect(seen)
        seen = learner.isIdle(ThreadWait(number: nil))
        #expect(!seen)
        seen = learner.isIdle(park)
        #expect(seen)
        // Another futex (a lock taken in a callback) is busy.
        seen = learner.isIdle(Self.line(202, [0x5555_2000, 0x80, 2], sp: 0x7ffe_0f00, pc: 0x7f00_0000_3100))
        #expect(!seen)
    }

    /// A watch that starts while the loop queues for a lock another thread holds: the first futex wait seen is
    /// not taken for the idle wait when its lock records an owner, however often it is seen, and the loop's real
    /// idle wait is still learned afterwards.
    @Test func aWaitForALockWithARecordedOwnerIsNeverLearnedAsIdle() {
        var learner = IdleWaitLearner()
        let lockWait = Self.line(202, [0x5555_2000, 0x80, 2], sp: 0x7ffe_0f00, pc: 0x7f00_0000_3100)
        for _ in 0..<(learner.futexEpisodes + learner.startLooks) {
            let seen = learner.isIdle(lockWait, cameBack: true, lockOwned: true)
            #expect(!seen)
        }
        #expect(learner.learned.isEmpty)
        let seen = learner.isIdle(Self.epoll(fd: 3))
        #expect(seen)
    }

    /// A watch that starts while the loop waits for a file lock another process holds (a CPython service's
    /// `fcntl.flock`, the watcher slow to start): the wait seen at the first look, before any other, is no idle
    /// wait however often it is seen, where a futex there would be taken for one.
    @Test func aFileLockWaitIsNeverLearnedAsIdle() {
        var learner = IdleWaitLearner()
        let flock = Self.line(73, [8, 2], sp: 0x7ffe_0f00, pc: 0x7f00_0000_4000)
        let fcntl = Self.line(72, [8, 7, 0x7ffe_0e00], sp: 0x7ffe_0f00, pc: 0x7f00_0000_4100)
        #expect(flock.kind == .lock && fcntl.kind == .lock)
        for _ in 0..<(learner.futexEpisodes + learner.startLooks) {
            let seen = learner.isIdle(flock, cameBack: true) || learner.isIdle(fcntl, cameBack: true)
            #expect(!seen)
        }
        #expect(learner.learned.isEmpty)
    }

    @Test func aFutexWaitTheThreadKeepsComingBackToIsLearnedWhenItHasNoEventWait() {
        var learner = IdleWaitLearner()
        let park = Self.line(202, [0x5555_1000, 0x89, 0], sp: 0x7ffe_1000, pc: 0x7f00_0000_3000)
        // Seen first in a sleep: the first futex wait is not taken on sight.
        _ = learner.isIdle(Self.line(230, [1, 0, 0x7ffe_2000], sp: 0x7ffe_0e00, pc: 0x7f00_0000_4000))
        var idle = false
        for episode in 0..<learner.futexEpisodes {
            idle = learner.isIdle(park)
            #expect(idle == (episode == learner.futexEpisodes - 1))
            _ = learner.isIdle(ThreadWait(number: nil))
        }
        #expect(idle)
        #expect(learner.learned.count == 1)
    }

    static let reusedPark = line(202, [0x5555_1000, 0x189, 0], sp: 0x7ffe_1000, pc: 0x7f00_0000_3000)
    static let nanosleep = line(35, [0x7ffe_2000, 0], sp: 0x7ffe_0e00, pc: 0x7f00_0000_4000)

    @Test func theFirstFutexWaitSeenJustAfterTheThreadWasWorkingIsItsIdleWait() {
        var learner = IdleWaitLearner()
        // Watching began as the thread finished a piece of work (running, then writing a line).
        var seen = learner.isIdle(ThreadWait(number: nil))
        #expect(!seen)
        seen = learner.isIdle(Self.line(1, [1, 0x5555_3000, 6], sp: 0x7ffe_0d00, pc: 0x7f00_0000_5000))
        #expect(!seen)
        seen = learner.isIdle(Self.reusedPark)
        #expect(seen)
        seen = learner.isIdle(Self.reusedPark)
        #expect(seen)
        // A lock taken in a callback later is busy.
        seen = learner.isIdle(Self.line(202, [0x5555_2000, 0x80, 2], sp: 0x7ffe_0f00, pc: 0x7f00_0000_3100))
        #expect(!seen)
    }

    @Test func aFutexWaitSeenAfterAnotherWaitOrAfterTheFirstLooksIsNotTakenOnSight() {
        var afterSleep = IdleWaitLearner()
        var seen = afterSleep.isIdle(Self.nanosleep)
        seen = afterSleep.isIdle(Self.reusedPark)
        #expect(!seen)
        var late = IdleWaitLearner()
        for _ in 0..<late.startLooks { _ = late.isIdle(ThreadWait(number: nil)) }
        seen = late.isIdle(Self.reusedPark)
        #expect(!seen)
    }

    @Test func aFutexWaitOnAReusedWordIsLearnedFromTheThreadsReturnsToIt() {
        // A runtime that frees and reallocates the lock it parks on shows the very same call every time: only its
        // sleeping again (the probe's cameBack) tells the episodes apart.
        var learner = IdleWaitLearner()
        var seen = learner.isIdle(Self.nanosleep)
        for _ in 0..<4 {  // seen again and again, never left: one episode
            seen = learner.isIdle(Self.reusedPark)
            #expect(!seen)
        }
        for _ in 1..<(learner.futexEpisodes - 1) {
            seen = learner.isIdle(Self.reusedPark, cameBack: true)
            #expect(!seen)
        }
        seen = learner.isIdle(Self.reusedPark, cameBack: true)
        #expect(seen)
        #expect(learner.learned.count == 1)
    }

    @Test func aThreadThatIdlesInAnEventWaitNeverLearnsAFutexAsIdle() {
        var learner = IdleWaitLearner()
        var seen = false
        seen = learner.isIdle(Self.epoll(fd: 3))
        #expect(seen)
        let lock = Self.line(202, [0x5555_2000, 0x80, 2], sp: 0x7ffe_0f00, pc: 0x7f00_0000_3100)
        for _ in 0..<10 {
            seen = learner.isIdle(lock)
            #expect(!seen)
            _ = learner.isIdle(ThreadWait(number: nil))
        }
    }

    @Test func theSameCallAcrossACaptureIsTheSameCallAndAnotherCallIsNot() {
        let futex = Self.line(202, [0x5555_2000, 0x80, 2], sp: 0x7ffe_0f00, pc: 0x7f00_0000_3100)
        let restarted = Self.line(219, [0x5555_2000, 0x80, 2], sp: 0x7ffe_0f00, pc: 0x7f00_0000_3100)
        #expect(futex.isSameCall(as: restarted))
        #expect(!futex.isSameCall(as: Self.line(1, [1, 0x5555_3000, 10], sp: 0x7ffe_0f00, pc: 0x7f00_0000_3100)))
        #expect(!futex.isSameCall(as: ThreadWait(number: nil)))
    }
}
