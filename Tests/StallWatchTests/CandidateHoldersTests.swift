import StallWatchTestSupport
// Candidate holders of a lock that keeps no owner: named as candidates, ranked, never certain.
import Testing

@testable import StallWatch

@Suite(.offPool) struct CandidateHoldersTests {
    static func thread(_ id: Int32, _ name: String, _ state: String, _ syscall: String?, wait: UInt64? = nil)
        -> StallReport.ThreadSnapshot
    {
        StallReport.ThreadSnapshot(
            threadId: id, name: name, state: state, wchan: nil, syscall: syscall, waitAddress: wait)
    }

    static let threads = [
        thread(10, "loop", "S", "futex", wait: 0x1000),
        thread(11, "fellow-waiter", "S", "futex", wait: 0x1000),
        thread(12, "idle-pool", "S", "epoll_wait"),
        thread(13, "sleeper", "S", "clock_nanosleep"),
        thread(14, "other-lock", "S", "futex", wait: 0x2000),
        thread(15, "reader", "S", "read"),
    ]

    static func evidence() -> CauseClassifier.Evidence {
        CauseClassifier.Evidence(
            loopThreadID: 10,
            observations: Array(repeating: .init(state: "S", syscall: 202, wchan: "futex_wait_queue"), count: 5),
            wallNanos: 1_000_000_000, loopCPUNanos: 0, threads: threads)
    }

    @Test func candidatesLeaveOutFellowWaitersAndIdleThreadsAndPutOtherLockWaitersFirst() {
        let candidates = CauseClassifier.candidateHolders(Self.evidence(), loopWaitAddress: 0x1000)
        #expect(candidates.map(\.threadId) == [14, 13, 15])
    }

    @Test func anOwnerlessLockWaitIsALockWithCandidatesNotACertainHolder() {
        let cause = CauseClassifier.classify(Self.evidence())
        #expect(cause.kind == .lock)
        #expect(cause.blockingThreadId == nil)
        #expect(cause.evidence.contains { $0.hasPrefix("candidate holders, not certain") && $0.contains("sleeper") })
    }

    @Test func candidatesAreReportDataRankedAndOnlyPossibleWithoutACycle() {
        let cause = CauseClassifier.classify(Self.evidence())
        let holders = cause.candidateHolders ?? []
        #expect(holders.map(\.threadId) == [14, 13, 15])
        #expect(holders.allSatisfy { $0.confidence == .possible && $0.processId == nil && !$0.reason.isEmpty })
        #expect(holders.first?.reason.hasPrefix("blocked on another lock") == true)
        #expect(cause.deadlockCertainty == nil && cause.deadlockedThreadIds == nil)
    }

    /// Two threads each blocked on a lock that records no owner, at different addresses, with nothing else that
    /// could hold either: each is the other's best candidate.
    static func ownerlessPair(extra: [StallReport.ThreadSnapshot] = []) -> CauseClassifier.Evidence {
        CauseClassifier.Evidence(
            loopThreadID: 10,
            observations: Array(repeating: .init(state: "S", syscall: 202, wchan: "futex_wait_queue"), count: 5),
            wallNanos: 1_000_000_000, loopCPUNanos: 0,
            threads: [
                thread(10, "loop", "S", "futex", wait: 0x1000), thread(20, "worker", "S", "futex", wait: 0x2000),
                thread(12, "idle-pool", "S", "epoll_wait"),
            ] + extra)
    }

    @Test func twoOwnerlessLocksWaitedCrosswiseAreALikelyDeadlockWithNoCertainHolder() {
        let cause = CauseClassifier.classify(Self.ownerlessPair())
        #expect(cause.kind == .deadlock)
        #expect(cause.deadlockCertainty == .likely)
        #expect(cause.deadlockedThreadIds == [10, 20])
        #expect(cause.blockingThreadId == nil)
        #expect(cause.candidateHolders?.first?.threadId == 20 && cause.candidateHolders?.first?.confidence == .likely)
        #expect(cause.evidence.contains { $0.hasSuffix("likely a deadlock") })
    }

    @Test func aThirdThreadBlockedOnALockLeavesTheHoldersAmbiguousAndNoCycleClaimed() {
        // Thread 5, blocked on a lock too, may hold either lock instead: no cycle is claimed.
        let cause = CauseClassifier.classify(
            Self.ownerlessPair(extra: [Self.thread(5, "third", "S", "futex", wait: 0x3000)]))
        #expect(cause.kind == .lock)
        #expect(cause.deadlockCertainty == nil)
        #expect(cause.candidateHolders?.allSatisfy { $0.confidence == .possible } == true)
    }

    @Test func aRecordedOwnerChainBackToTheLoopIsAProvenDeadlock() {
        var loop = Self.thread(10, "loop", "S", "futex", wait: 0x1000)
        loop.waitingForThreadId = 20
        var worker = Self.thread(20, "worker", "S", "futex", wait: 0x2000)
        worker.waitingForThreadId = 10
        let e = CauseClassifier.Evidence(
            loopThreadID: 10,
            observations: Array(
                repeating: .init(state: "S", syscall: 202, wchan: "futex_wait_queue", lockOwner: 20), count: 5),
            wallNanos: 1_000_000_000, loopCPUNanos: 0, threads: [loop, worker])
        let cause = CauseClassifier.classify(e)
        #expect(cause.kind == .deadlock && cause.deadlockCertainty == .proven)
        #expect(cause.blockingThreadId == 20 && cause.candidateHolders == nil)
    }

    @Test func aWaiterOnALockTheLoopHoldsIsOnlyALikelyDeadlockWhenTheLoopsLockRecordsNoOwner() {
        var worker = Self.thread(20, "worker", "S", "futex", wait: 0x2000)
        worker.waitingForThreadId = 10
        let e = CauseClassifier.Evidence(
            loopThreadID: 10,
            observations: Array(repeating: .init(state: "S", syscall: 202, wchan: "futex_wait_queue"), count: 5),
            wallNanos: 1_000_000_000, loopCPUNanos: 0,
            threads: [Self.thread(10, "loop", "S", "futex", wait: 0x1000), worker])
        let cause = CauseClassifier.classify(e)
        #expect(cause.kind == .deadlock && cause.deadlockCertainty == .likely)
        #expect(cause.blockingThreadId == nil)
        #expect(cause.candidateHolders?.map(\.threadId) == [20])
    }
}
