// The verdict of a wait on another process, and of a timed wait on the process's own wake-ups.
import StallWatchTestSupport
import Testing

@testable import StallWatch

@Suite(.offPool) struct OtherProcessCauseTests {
    static func evidence(_ observation: CauseClassifier.Observation) -> CauseClassifier.Evidence {
        CauseClassifier.Evidence(
            loopThreadID: 10, observations: Array(repeating: observation, count: 4), wallNanos: 1_000_000_000,
            loopCPUNanos: 0, threads: [])
    }

    static let peer = OtherProcessWait(
        object: .pipe, processID: 77, name: "sleep", threadID: 77, state: "sleeping, in clock_nanosleep",
        reason: "holds the write end of the pipe the loop reads (pipe:[9]) (its descriptor 1)",
        evidence: "process 77 (sleep) holds the write end of the pipe the loop reads (pipe:[9])")

    @Test func aReadWhoseOtherEndAnotherProcessHoldsIsIOBlockedByThatProcess() {
        let cause = CauseClassifier.classify(
            Self.evidence(.init(state: "S", syscall: 0, wchan: nil, otherProcess: Self.peer)))
        #expect(cause.kind == .io)
        #expect(cause.blockingProcess?.processId == 77 && cause.blockingProcess?.threadId == 77)
        #expect(cause.blockingProcess?.state == "sleeping, in clock_nanosleep")
        #expect(cause.evidence.contains(Self.peer.evidence))
    }

    @Test func aNestedEventWaitOnAnotherProcessesSocketNamesItToo() {
        var peer = Self.peer
        peer.object = .unixSocket
        let cause = CauseClassifier.classify(
            Self.evidence(.init(state: "S", syscall: 7, wchan: nil, otherProcess: peer)))
        #expect(cause.kind == .io && cause.blockingProcess?.processId == 77)
    }

    @Test func anOtherEndNobodyCouldBeSeenHoldingNamesNoProcessButSaysWhy() {
        let unseen = OtherProcessWait(object: .pipe, evidence: "the other end of the pipe: access refused")
        let cause = CauseClassifier.classify(
            Self.evidence(.init(state: "S", syscall: 0, wchan: nil, otherProcess: unseen)))
        #expect(cause.kind == .io && cause.blockingProcess == nil)
        #expect(cause.evidence.contains(unseen.evidence))
    }

    @Test func aSemaphoreWaitIsALockWithItsLastOperatorAsTheLikelyHolder() {
        var holder = Self.peer
        holder.object = .semaphore
        holder.reason = "the last process to operate on the semaphore: likely its holder"
        let wait = ThreadWait(number: 65, arguments: [3, 0x1000, 1, 0, 0, 0], stackPointer: 1, programCounter: 1)
        #expect(wait.kind == .lock)
        let cause = CauseClassifier.classify(
            Self.evidence(.init(state: "S", syscall: 65, wchan: nil, waitKind: wait.kind, otherProcess: holder)))
        #expect(cause.kind == .lock && cause.blockingProcess?.processId == 77 && cause.blockingThreadId == nil)
        #expect(cause.evidence.contains { $0.contains("waiting on a SysV semaphore in semop") })
    }

    @Test func aTimedWaitOnItsOwnWakeupsIsASleepWithWhy() {
        let why = "a timed event wait (timeout 1000 ms) on the process's own wake-up descriptor only (eventfd)"
        let cause = CauseClassifier.classify(
            Self.evidence(.init(state: "S", syscall: 7, wchan: nil, ownWakeupSleep: why)))
        #expect(cause.kind == .sleep)
        #expect(cause.evidence.contains(why))
    }
}
