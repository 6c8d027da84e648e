// Idle execution: tasks wait for the loop to run out of work, and share each idle period within a budget.
import Dispatch
import Foundation
import StallWatchTestSupport
import Testing

@testable import StallWatch
@testable import StallWatchRemedies

@Suite(.offPool) struct IdleExecutorTests {
    @Test func idleTasksRunOnlyAfterTheTurnsOtherWork() {
        let scheduler = ManualScheduler()
        let idle = IdleExecutor(scheduler: scheduler, budgetPerIdle: .milliseconds(5))
        let log = Log<String>()
        idle.submit { log.append("idle") }
        scheduler.enqueue { log.append("request 1") }
        scheduler.enqueue(after: .zero) { log.append("timer") }
        scheduler.enqueue { log.append("request 2") }
        scheduler.tick()
        #expect(log.values == ["timer", "request 1", "request 2", "idle"])
        #expect(idle.pendingCount == 0)
        #expect(idle.completedCount == 1)
    }

    @Test func eachIdlePeriodRunsTasksUntilItsBudgetIsSpentAndTheRestWaitForTheNext() {
        let scheduler = ManualScheduler()
        let idle = IdleExecutor(scheduler: scheduler, budgetPerIdle: .milliseconds(5))
        let log = Log<Int>()
        for i in 0..<6 {
            idle.submit {
                scheduler.moveClock(by: .milliseconds(3))  // each task "takes" 3 ms
                log.append(i)
            }
        }
        scheduler.tick()
        #expect(log.values == [0, 1], "3 ms + 3 ms crosses the 5 ms budget")
        // Tasks remain, so the executor woke the loop: a request that arrived meanwhile goes first.
        #expect(scheduler.queuedCount == 1)
        scheduler.runUntilIdle()
        #expect(log.values == Array(0..<6))
        #expect(idle.idlePeriodsUsed == 3)
    }

    @Test func aLoopThatNeverIdlesRunsNoIdleTasks() {
        let scheduler = ManualScheduler()
        let idle = IdleExecutor(scheduler: scheduler)
        let log = Log<String>()
        idle.submit { log.append("idle") }
        // A block that enqueues another each turn keeps the loop busy (no turn ends with an empty queue).
        final class Spinner: Sendable {
            let turns = Log<Int>()
            func spin(_ scheduler: ManualScheduler, _ n: Int) {
                turns.append(n)
                if n < 5 { scheduler.enqueue { self.spin(scheduler, n + 1) } }
            }
        }
        let spinner = Spinner()
        scheduler.enqueue { spinner.spin(scheduler, 0) }
        for _ in 0..<5 { scheduler.tick() }
        #expect(log.values.isEmpty)
        scheduler.tick()
        #expect(log.values == ["idle"])
    }

    @Test(.timeLimit(.minutes(3)))
    func onARealLoopIdleTasksRunBeforeTheLoopWaits() throws {
        let loop = try EventLoop(name: "idle", mainQueue: .disabled)
        let idle = IdleExecutor(scheduler: loop)
        let done = DispatchSemaphore(value: 0)
        let log = Log<Bool>()
        let thread = Thread { loop.run() }
        thread.start()
        for i in 0..<10 {
            idle.submit {
                log.append(loop.inLoopThread)
                if i == 9 { done.signal() }
            }
        }
        done.wait()
        loop.stop()
        #expect(log.values == Array(repeating: true, count: 10))
    }
}
