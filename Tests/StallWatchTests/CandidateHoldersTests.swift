// Candidate holders of a lock that keeps no owner: named as candidates, ranked, never certain.
import Testing

@testable import StallWatch

@Suite struct CandidateHoldersTests {
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
}
