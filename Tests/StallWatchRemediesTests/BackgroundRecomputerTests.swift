// Off-loop work with on-loop delivery: bursts of signals coalesce, results arrive on the loop, in order.
import Dispatch
import Foundation
import StallWatchTestSupport
import Synchronization
import Testing

@testable import StallWatch
@testable import StallWatchRemedies

@Suite(.offPool) struct BackgroundRecomputerTests {
    @Test(.timeLimit(.minutes(3)))
    func aBurstOfSignalsBecomesFewComputationsAndTheLastResultCoversEveryChange() throws {
        let loop = try EventLoop(name: "recompute", mainQueue: .disabled)
        let thread = Thread { loop.run() }
        thread.start()
        defer { loop.stop() }
        let firstStarted = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let seenChanges = Mutex<Set<Int>>([])
        let deliveries = Log<(value: Int, onLoop: Bool)>()
        let allDelivered = DispatchSemaphore(value: 0)
        let computeCalls = Atomic<Int>(0)
        let recomputer = BackgroundRecomputer<Int, Int>(scheduler: loop) { changes in
            if computeCalls.add(1, ordering: .relaxed).newValue == 1 {
                firstStarted.signal()
                release.wait()  // hold the first computation while the burst arrives
            }
            return seenChanges.withLock { seen in
                seen.formUnion(changes)
                return seen.count
            }
        } deliver: { total in
            deliveries.append((total, loop.inLoopThread))
            if total == 1000 { allDelivered.signal() }
        }
        recomputer.signal(0)
        firstStarted.wait()
        for i in 1..<1000 { recomputer.signal(i) }
        release.signal()
        allDelivered.wait()
        #expect(recomputer.signalCount == 1000)
        #expect(recomputer.computationCount == 2, "one for the first signal, one for the whole burst")
        #expect(deliveries.values.map(\.value) == [1, 1000])
        #expect(deliveries.values.allSatisfy { $0.onLoop })
    }

    @Test(.timeLimit(.minutes(3)))
    func aBackgroundWorkerRunsJobsOffTheLoopInOrderAndCompletesThemOnTheLoop() throws {
        let loop = try EventLoop(name: "worker", mainQueue: .disabled)
        let thread = Thread { loop.run() }
        thread.start()
        defer { loop.stop() }
        struct Failure: Error {}
        let worker = BackgroundWorker(scheduler: loop, label: "test.worker")
        let ranOnLoop = Log<Bool>()
        let results = Log<Int>()
        let done = DispatchSemaphore(value: 0)
        for i in 0..<50 {
            worker.submit({ () throws -> Int in
                ranOnLoop.append(loop.inLoopThread)
                if i == 49 { throw Failure() }
                return i
            }) { result in
                #expect(loop.inLoopThread)
                switch result {
                case .success(let value): results.append(value)
                case .failure: done.signal()
                }
            }
        }
        done.wait()
        #expect(results.values == Array(0..<49))
        #expect(!ranOnLoop.values.contains(true))
        #expect(worker.outstandingCount == 0)
    }
}
