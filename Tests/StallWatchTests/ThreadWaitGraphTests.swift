import StallWatchTestSupport
// Ordering a process's threads by relevance to a stall, from the wait-for edges of every thread.
import Testing

@testable import StallWatch

@Suite(.offPool) struct ThreadWaitGraphTests {
    static func probe(_ tid: Int32) -> ThreadProbe {
        ThreadProbe(
            threadID: tid, name: "t\(tid)", state: "S", wchan: nil, syscall: nil, syscallArg0: nil, cpuNanos: 0,
            voluntarySwitches: 0, involuntarySwitches: 0, runQueueWaitNanos: 0)
    }

    static func graph(_ tids: [Int32], _ edges: [Int32: Int32]) -> ThreadWaitGraph {
        ThreadWaitGraph(probes: Dictionary(uniqueKeysWithValues: tids.map { ($0, probe($0)) }), waitsFor: edges)
    }

    @Test func theLoopThenItsOwnerChainThenWaitersOnThemComeBeforeLowerThreadIDs() {
        // 500 waits for 900, which waits for 700; 950 waits for 500 (the loop); 300 and 400 are bystanders.
        let g = Self.graph([300, 400, 500, 700, 900, 950, 990], [500: 900, 900: 700, 950: 500, 990: 400])
        #expect(g.relevanceOrder(loop: 500) == [500, 900, 700, 950, 990, 300, 400])
    }

    @Test func aDeadlockCycleEndsTheChainInsteadOfLoopingForever() {
        let g = Self.graph([1, 2, 3], [2: 3, 3: 2])
        #expect(g.relevanceOrder(loop: 2) == [2, 3, 1])
    }

    @Test func withoutALoopThreadTheOrderIsLockWaitersThenTheRest() {
        let g = Self.graph([1, 2, 3], [3: 1])
        #expect(g.relevanceOrder(loop: nil) == [3, 1, 2])
    }
}
