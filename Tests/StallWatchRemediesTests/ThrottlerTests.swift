import StallWatchTestSupport
// The throttler on a manual clock: once per loop turn, or once per interval with the last request kept.
import Testing

@testable import StallWatchRemedies

@Suite(.offPool) struct ThrottlerTests {
    @Test func requestsInOneLoopTurnCoalesceIntoOneRunOfTheLatestAction() {
        let scheduler = ManualScheduler()
        let throttler = Throttler(scheduler: scheduler, rate: .oncePerLoopTurn)
        let log = Log<Int>()
        for i in 0..<1000 { throttler.call { log.append(i) } }
        #expect(log.values.isEmpty, "nothing runs before the loop turns")
        scheduler.tick()
        #expect(log.values == [999])
        throttler.call { log.append(1000) }
        throttler.call { log.append(1001) }
        scheduler.tick()
        #expect(log.values == [999, 1001])
        #expect(throttler.runCount == 2)
        #expect(throttler.requestCount == 1002)
    }

    @Test func anIntervalRateRunsAtOnceThenAtMostOncePerIntervalAndAlwaysRunsTheLastRequest() {
        let scheduler = ManualScheduler(startNanos: 0)
        let throttler = Throttler(scheduler: scheduler, rate: .oncePerInterval(.milliseconds(100)))
        let times = Log<UInt64>()
        let values = Log<Int>()
        func request(_ value: Int) {
            throttler.call {
                times.append(scheduler.uptimeNanos / 1_000_000)
                values.append(value)
            }
        }
        request(0)
        scheduler.tick()
        #expect(values.values == [0], "the first request runs in the next turn")
        // Requests every 10 ms for 350 ms: runs at 100, 200, 300 (before that instant's request) with the latest
        // value each time, and one last run for the final request.
        for step in 1...35 {
            scheduler.advance(by: .milliseconds(10))
            request(step)
        }
        scheduler.advance(by: .milliseconds(200))
        #expect(times.values == [0, 100, 200, 300, 400])
        #expect(values.values == [0, 9, 19, 29, 35])
    }
}
