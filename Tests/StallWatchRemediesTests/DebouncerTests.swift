import StallWatchTestSupport
// The debouncer on a manual clock: last call wins, after a quiet period, with one timer per quiet period.
import Synchronization
import Testing

@testable import StallWatchRemedies

/// Collects values from any thread.
final class Log<T: Sendable>: Sendable {
    private let items = Mutex<[T]>([])
    func append(_ item: T) { items.withLock { $0.append(item) } }
    var values: [T] { items.withLock { $0 } }
}

@Suite(.offPool) struct DebouncerTests {
    @Test func onlyTheLastCallOfABurstRunsOnceTheCallsHaveBeenQuietForTheDelay() {
        let scheduler = ManualScheduler()
        let debouncer = Debouncer(scheduler: scheduler, delay: .milliseconds(100))
        let log = Log<Int>()
        debouncer.call { log.append(1) }
        scheduler.advance(by: .milliseconds(50))
        debouncer.call { log.append(2) }
        scheduler.advance(by: .milliseconds(50))
        debouncer.call { log.append(3) }
        // 100 ms after the first call, but only 0 ms after the last: nothing yet.
        scheduler.advance(by: .milliseconds(99))
        #expect(log.values.isEmpty)
        #expect(debouncer.isPending)
        scheduler.advance(by: .milliseconds(1))
        #expect(log.values == [3])
        #expect(debouncer.runCount == 1)
        #expect(!debouncer.isPending)
        scheduler.advance(by: .seconds(1))
        #expect(log.values == [3])
    }

    @Test func aCallAfterTheRunStartsANewQuietPeriod() {
        let scheduler = ManualScheduler()
        let debouncer = Debouncer(scheduler: scheduler, delay: .milliseconds(10))
        let log = Log<Int>()
        for i in 0..<1000 { debouncer.call { log.append(i) } }
        #expect(scheduler.timerCount == 1, "one timer per quiet period, not one per call")
        scheduler.advance(by: .milliseconds(10))
        debouncer.call { log.append(-1) }
        scheduler.advance(by: .milliseconds(9))
        #expect(log.values == [999])
        scheduler.advance(by: .milliseconds(1))
        #expect(log.values == [999, -1])
    }

    @Test func cancelDropsThePendingCall() {
        let scheduler = ManualScheduler()
        let debouncer = Debouncer(scheduler: scheduler, delay: .milliseconds(10))
        let log = Log<Int>()
        debouncer.call { log.append(1) }
        debouncer.cancel()
        scheduler.advance(by: .milliseconds(50))
        #expect(log.values.isEmpty)
        #expect(scheduler.timerCount == 0)
    }
}
