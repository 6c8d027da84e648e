// The order and the verdicts of `stallwatch dump`: what is stuck, what is idle, who holds what, what comes first.
import StallWatchTestSupport
import Testing

@testable import StallWatch
@testable import StallWatchSidecar

@Suite(.offPool) struct DumpRankingTests {
    static func entry(
        _ tid: Int32, _ activity: ProcessDump.Thread.Activity, state: String = "S", syscall: String? = nil,
        waitAddress: UInt64? = nil, blockedMs: UInt64? = nil
    ) -> DumpRanking.Entry {
        var snapshot = StallReport.ThreadSnapshot(threadId: tid, name: "t\(tid)", state: state, syscall: syscall)
        snapshot.waitAddress = waitAddress
        return .init(snapshot: snapshot, activity: activity, blockedForNanos: blockedMs.map { $0 * 1_000_000 })
    }

    static func frame(_ symbol: String) -> StackFrame { StackFrame(address: 0x1000, symbol: symbol) }

    @Test func whatAThreadDoesIsJudgedFromItsWaitNotFromTheProgram() {
        #expect(DumpRanking.activity(state: "R", syscallKind: nil, ownerKnown: false) == .onCPU)
        #expect(DumpRanking.activity(state: "D", syscallKind: .io, ownerKnown: false) == .blocked)
        #expect(DumpRanking.activity(state: "S", syscallKind: .lock, ownerKnown: true) == .blocked)
        #expect(DumpRanking.activity(state: "S", syscallKind: .io, ownerKnown: false) == .blocked)
        #expect(DumpRanking.activity(state: "S", syscallKind: .sleep, ownerKnown: false) == .blocked)
        #expect(DumpRanking.activity(state: "S", syscallKind: .idleWait, ownerKnown: false) == .idle)
        #expect(DumpRanking.activity(state: "S", syscallKind: .other, ownerKnown: false) == .idle)
        // A futex wait with no recorded owner: its stack decides.
        #expect(DumpRanking.activity(state: "S", syscallKind: .lock, ownerKnown: false) == nil)
        let acquiring = [Self.frame("__lll_lock_wait"), Self.frame("__pthread_mutex_lock"), Self.frame("work")]
        #expect(DumpRanking.activity(ofOwnerlessFutexWaitWith: acquiring) == .blocked)
        let semaphore = [Self.frame("do_futex_wait.constprop.0"), Self.frame("__new_sem_wait_slow64.constprop.0")]
        #expect(DumpRanking.activity(ofOwnerlessFutexWaitWith: semaphore) == .blocked)
        let pool = [Self.frame("__futex_abstimed_wait_common"), Self.frame("__pthread_cond_wait"), Self.frame("run")]
        #expect(DumpRanking.activity(ofOwnerlessFutexWaitWith: pool) == .idle)
        #expect(DumpRanking.activity(ofOwnerlessFutexWaitWith: []) == .blocked, "unknown: a lock is costlier to miss")
    }

    static func named(_ entry: DumpRanking.Entry, _ name: String) -> DumpRanking.Entry {
        var entry = entry
        entry.snapshot.name = name
        return entry
    }

    @Test func unnamedLoopsAreGuessedFromTheirEventWaitsTheirStuckNumberedSiblingsAndAStuckMainThread() {
        let main = Self.named(Self.entry(1, .idle, syscall: "futex"), "service")  // parked on a condition variable
        let idleLoop = Self.named(Self.entry(2, .idle, syscall: "epoll_wait"), "svc-loop-1")
        let stuckLoop = Self.named(Self.entry(3, .blocked, syscall: "futex", waitAddress: 0x10), "svc-loop-0")
        let helper = Self.named(Self.entry(4, .blocked, syscall: "nanosleep"), "svc-loop-0")  // took 3's name
        let pooled = Self.named(Self.entry(5, .idle, syscall: "futex"), "svc-loop-2")  // numbered, but idle elsewhere
        let pausing = Self.named(Self.entry(6, .idle, syscall: "pause"), "signals")  // idle, not on descriptors
        let entries = [main, idleLoop, stuckLoop, helper, pooled, pausing]
        #expect(DumpRanking.guessedLoops(entries, mainThread: 1) == [2, 3])
        // A main thread that is stuck may be the loop itself: it is named too.
        let stuckMain = Self.named(Self.entry(1, .blocked, syscall: "fsync"), "service")
        #expect(DumpRanking.guessedLoops([stuckMain] + entries.dropFirst(), mainThread: 1) == [1, 2, 3])
        // With nothing in an event wait, the main thread alone, as before.
        #expect(DumpRanking.guessedLoops([main, helper, pooled, pausing], mainThread: 1) == [1])
        #expect(DumpRanking.numberedStem("NIO-ELT-0-#12") == "NIO-ELT-0-#")
        #expect(DumpRanking.numberedStem("worker") == nil && DumpRanking.numberedStem("42") == nil)
    }

    @Test func aCycleOfOwnersIsFoundWhereverItStarts() {
        #expect(DumpRanking.cycle(in: [1: 2, 2: 3, 3: 2]) == [2, 3])
        #expect(DumpRanking.cycle(in: [1: 2, 2: 3]) == nil)
        #expect(DumpRanking.cycle(in: [:]) == nil)
    }

    @Test func aDeadlockComesFirstThenStuckLoopsTheirHoldersOtherStuckThreadsAndIdleOnes() {
        let entries = [
            Self.entry(10, .idle, syscall: "epoll_wait", blockedMs: 900),  // a known loop, idle
            Self.entry(11, .blocked, syscall: "futex", waitAddress: 0x10, blockedMs: 4_000),  // a known loop, stuck
            Self.entry(12, .blocked, syscall: "fsync", blockedMs: 4_100),  // owns what 11 waits for
            Self.entry(20, .blocked, syscall: "read", blockedMs: 300),
            Self.entry(21, .onCPU, state: "R"),
            Self.entry(22, .blocked, syscall: "clock_nanosleep", blockedMs: 2_000),
            Self.entry(30, .idle, syscall: "futex", blockedMs: 50_000),
            Self.entry(31, .idle, syscall: "epoll_wait"),
            Self.entry(40, .blocked, syscall: "futex", waitAddress: 0x40, blockedMs: 9_000),  // a deadlock
            Self.entry(41, .blocked, syscall: "futex", waitAddress: 0x41, blockedMs: 9_000),
        ]
        let ranking = DumpRanking(knownLoops: [10, 11], guessedLoops: [], waitsFor: [11: 12, 40: 41, 41: 40])
        let order = ranking.order(entries)
        #expect(order.map(\.entry.snapshot.threadId) == [40, 41, 11, 12, 10, 22, 20, 21, 30, 31])
        let roles = Dictionary(uniqueKeysWithValues: order.map { ($0.entry.snapshot.threadId, $0.role) })
        #expect(roles[40] == .lockOwner && roles[41] == .lockOwner)
        #expect(roles[10] == .loop && roles[11] == .loop)
        #expect(roles[12] == .lockOwner)
        #expect(roles[20] == .other && roles[30] == .other)
    }

    @Test func aGuessedLoopComesFirstOnlyWhenStuck() {
        let entries = [Self.entry(1, .idle, syscall: "poll"), Self.entry(7, .blocked, syscall: "read", blockedMs: 5)]
        let idle = DumpRanking(knownLoops: [], guessedLoops: [1], waitsFor: [:]).order(entries)
        #expect(idle.map(\.entry.snapshot.threadId) == [7, 1])
        #expect(idle.last?.role == .loop)
        let stuck = [Self.entry(1, .blocked, syscall: "read", blockedMs: 1), entries[1]]
        #expect(
            DumpRanking(knownLoops: [], guessedLoops: [1], waitsFor: [:]).order(stuck).first?.entry.snapshot.threadId
                == 1)
    }

    @Test func aStuckThreadOnALockThatRecordsNoOwnerHasItsCandidateHoldersTaggedAfterIt() {
        let entries = [
            Self.entry(1, .blocked, syscall: "futex", waitAddress: 0x50, blockedMs: 3_000),
            Self.entry(2, .blocked, syscall: "futex", waitAddress: 0x50, blockedMs: 2_000),  // a fellow waiter
            Self.entry(3, .onCPU, state: "R"),
            Self.entry(4, .idle, syscall: "epoll_wait"),
        ]
        let order = DumpRanking(knownLoops: [1], guessedLoops: [], waitsFor: [:]).order(entries)
        #expect(order.map(\.entry.snapshot.threadId) == [1, 3, 2, 4])
        #expect(order[0].candidates == [3])
        #expect(order[1].role == .candidateHolder)
        #expect(order[2].role == .other, "a fellow waiter is no candidate")
        #expect(order[3].role == .other, "an event wait holds no lock")
    }

    /// A holder usually took its lock before its waiter blocked: it has been blocked longer, yet comes after it.
    @Test func aWaiterOnALockComesBeforeItsLongerBlockedCandidateHolder() {
        let entries = [
            Self.entry(5, .blocked, syscall: "clock_nanosleep", blockedMs: 2_700),
            Self.entry(6, .blocked, syscall: "futex", waitAddress: 0x60, blockedMs: 2_500),
        ]
        let order = DumpRanking(knownLoops: [], guessedLoops: [], waitsFor: [:]).order(entries)
        #expect(order.map(\.entry.snapshot.threadId) == [6, 5])
        #expect(order[1].role == .candidateHolder)
        #expect(order[0].candidates == [5])
    }
}
