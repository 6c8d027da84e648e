// A process-shared lock: the shared mappings it lives in, and its verdict from who maps it.
import StallWatchTestSupport
import Testing

@testable import StallWatch

@Suite(.offPool) struct SharedLockTests {
    static let maps = """
        7f1c2a000000-7f1c2a001000 rw-s 00000000 00:1a 4242                       /dev/shm/sem.mp-1a2b (deleted)
        7f1c2b000000-7f1c2b002000 rw-p 00000000 00:1a 4243                       /tmp/private
        7f1c2c000000-7f1c2c001000 rw-s 00001000 08:01 77 /data/shared table
        7f1c2d000000-7f1c2d001000 rw-s 00000000 00:01 0
        zzzz-7f1c2e001000 rw-s 00000000 00:01 5 /x
        7f1c2f001000-7f1c2f000000 rw-s 00000000 00:01 6 /backwards
        7f1c30000000-7f1c30001000 rw-s
        """

    @Test func onlySharedFileBackedWellFormedLinesAreKeptWithTheirPathsAndOffsets() {
        let mappings = SharedLock.sharedMappings(in: Self.maps)
        #expect(mappings.map(\.inode) == [4242, 77])
        #expect(mappings.first?.path == "/dev/shm/sem.mp-1a2b (deleted)")
        #expect(mappings.last?.path == "/data/shared table" && mappings.last?.offset == 0x1000)
    }

    static func finding(_ candidates: [SharedLock.Candidate], refused: Int = 0) -> SharedLock.Finding {
        SharedLock.Finding(object: "/dev/shm/sem.mp-1a2b at offset 0x0", candidates: candidates, refused: refused)
    }

    @Test func theOneOtherProcessMappingTheLockThatDoesNotWaitOnItIsTheLikelyHolder() {
        let cause = CauseClassifier.sharedLockCause(
            Self.finding([
                .init(processID: 50, name: "batch-writer", waiting: false),
                .init(processID: 60, name: "peer", waiting: true),
            ]), evidence: [])
        #expect(cause.kind == .lock && cause.blockingProcess == nil && cause.blockingThreadId == nil)
        #expect(cause.candidateHolders?.map(\.processId) == [50, 60])
        #expect(cause.candidateHolders?.map(\.confidence) == [.likely, .possible])
    }

    @Test func twoPossibleHoldersAreBothPossibleAndUnreadableProcessesAreSaid() {
        let two = CauseClassifier.sharedLockCause(
            Self.finding([
                .init(processID: 50, name: "a", waiting: false), .init(processID: 51, name: "b", waiting: false),
            ]),
            evidence: [])
        #expect(two.candidateHolders?.allSatisfy { $0.confidence == .possible } == true)
        let unreadable = CauseClassifier.sharedLockCause(
            Self.finding([.init(processID: 50, name: "a", waiting: false)], refused: 2), evidence: [])
        #expect(unreadable.evidence.contains { $0.contains("the maps of 2 other processes could not be read") })
    }

    @Test func anOwnerTheSharedWordRecordsIsTheBlockingProcess() {
        var found = Self.finding([.init(processID: 50, name: "a", waiting: false)])
        found.owner = OtherProcessWait(
            object: .semaphore, processID: 50, name: "a", threadID: 52, state: "sleeping, in nanosleep",
            reason: "its thread 52 is the owner the shared lock's word records", evidence: "")
        let cause = CauseClassifier.sharedLockCause(found, evidence: [])
        #expect(cause.blockingProcess?.processId == 50 && cause.blockingProcess?.threadId == 52)
        #expect(cause.candidateHolders == nil)
    }
}
