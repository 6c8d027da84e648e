// Chunked execution: steps are cut into chunks by budget, other loop work runs between chunks, sorts are right.
import Dispatch
import Foundation
import StallWatchTestSupport
import Synchronization
import Testing

@testable import StallWatch
@testable import StallWatchRemedies

@Suite(.offPool) struct ChunkedExecutorTests {
    @Test func aJobIsCutIntoChunksByTheTimeBudgetAndOtherWorkRunsBetweenThem() {
        let scheduler = ManualScheduler()
        let executor = ChunkedExecutor(scheduler: scheduler, timeBudget: .milliseconds(5))
        let log = Log<String>()
        let remaining = Atomic<Int>(12)
        let job = executor.run(
            {
                scheduler.moveClock(by: .milliseconds(1))  // each step "takes" 1 ms of loop time
                log.append("step")
                return remaining.subtract(1, ordering: .relaxed).newValue > 0
            }, completion: { log.append("done") })
        scheduler.tick()
        #expect(log.values == Array(repeating: "step", count: 5))
        // Work that arrives meanwhile runs before the next chunk's end.
        scheduler.enqueue { log.append("request") }
        scheduler.tick()
        scheduler.runUntilIdle()
        let steps = log.values
        #expect(steps.filter { $0 == "step" }.count == 12)
        #expect(steps.last == "done")
        let requestAt = try! #require(steps.firstIndex(of: "request"))
        #expect(requestAt <= 10, "the request ran between chunks: \(steps)")
        #expect(job.isFinished)
        #expect(job.chunkCount == 3)
        #expect(job.stepCount == 12)
    }

    @Test func aStepLimitMakesChunksDeterministicAndCancelStopsTheJobWithoutCompletion() {
        let scheduler = ManualScheduler()
        let executor = ChunkedExecutor(scheduler: scheduler, timeBudget: .seconds(1), maxStepsPerChunk: 10)
        let seen = Log<Int>()
        let completed = Atomic<Bool>(false)
        let job = executor.forEach(
            Array(0..<100), { seen.append($0) }, completion: { completed.store(true, ordering: .relaxed) })
        scheduler.tick()
        scheduler.tick()
        #expect(seen.values == Array(0..<20))
        job.cancel()
        scheduler.runUntilIdle()
        #expect(seen.values.count == 20)
        let didComplete = completed.load(ordering: .relaxed)
        #expect(!didComplete)
        #expect(!job.isFinished)
    }

    @Test func chunkedSortMatchesAStableSortForEverySize() {
        struct Item: Sendable, Equatable {
            var key: Int
            var order: Int
        }
        var rng = SeededGenerator()
        for count in [0, 1, 2, 127, 128, 129, 1000, 4097, 20_000] {
            let scheduler = ManualScheduler()
            let executor = ChunkedExecutor(scheduler: scheduler, maxStepsPerChunk: 1)
            let items = (0..<count).map { Item(key: Int.random(in: 0..<50, using: &rng), order: $0) }
            let result = Mutex<[Item]?>(nil)
            let job = executor.sort(items, by: { $0.key < $1.key }) { sorted in result.withLock { $0 = sorted } }
            scheduler.runUntilIdle()
            let sorted = result.withLock { $0 }
            // Stable: equal keys keep their original order.
            #expect(
                sorted == items.sorted { ($0.key, $0.order) < ($1.key, $1.order) }, "count \(count), seed \(rng.seed)")
            if count > 20_000 - 1 { #expect(job.chunkCount > 100) }
        }
    }

    @Test(.timeLimit(.minutes(3)))
    func onARealLoopTimersKeepFiringWhileALargeSortRunsInChunks() throws {
        let loop = try EventLoop(name: "chunked", mainQueue: .disabled)
        let executor = ChunkedExecutor(scheduler: loop, timeBudget: .milliseconds(2))
        let ticks = Atomic<Int>(0)
        let finished = DispatchSemaphore(value: 0)
        let timer = loop.schedule(after: .milliseconds(1), repeating: .milliseconds(1)) {
            ticks.add(1, ordering: .relaxed)
        }
        let items = (0..<200_000).map { ($0 &* 7919) % 200_003 }
        let job = Mutex<ChunkedJob?>(nil)
        let ticksDuringSort = Atomic<Int>(-1)
        loop.perform {
            let before = ticks.load(ordering: .relaxed)
            job.withLock {
                $0 = executor.sort(items, by: <) { sorted in
                    ticksDuringSort.store(ticks.load(ordering: .relaxed) - before, ordering: .relaxed)
                    #expect(sorted == items.sorted())
                    timer.cancel()
                    loop.stop()
                    finished.signal()
                }
            }
        }
        let thread = Thread { loop.run() }
        thread.start()
        finished.wait()
        let chunks = try #require(job.withLock { $0 }).chunkCount
        #expect(chunks > 5)
        #expect(ticksDuringSort.load(ordering: .relaxed) > 2, "the timer fired between chunks")
    }
}
