// The in-process named-thread watcher on a loop that goes from one blocking call straight into another: two stalls,
// the first saying what the look that ended it saw.
import Dispatch
import Foundation
import StallWatchTestSupport
import Testing

@testable import StallWatch

#if canImport(Glibc)
    import Glibc
#endif

@Suite(.offPool, .serialized) struct ThreadWatchdogEndingTests {
    /// A sleep, then straight into a wait on nothing, each 400 ms (four thresholds): two stalls. The first ends where
    /// a look saw the thread go on from its sleep, and its report says so — the calls and what the counters moved —
    /// so that a piece of work split in two can be told from two; the second ends in the loop's idle read, with no
    /// such note.
    @Test(.timeLimit(.minutes(2)))
    func aStallEndedShortOfTheIdleWaitSaysWhatTheLookThatEndedItSaw() throws {
        let directory = Fixtures.temporaryDirectory("thread-watchdog-ending")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // A loop that idles in a blocking pipe read; byte 2 is a turn that sleeps 400 ms, then waits 400 ms in
        // `poll` on no descriptor.
        let loop = try ThreadWatchdogWithdrawalTests.PipeReadLoop(name: "split-elt-0") { byte in
            guard byte == 2 else { return }
            var request = timespec(tv_sec: 0, tv_nsec: 400_000_000)
            nanosleep(&request, nil)
            poll(nil, 0, 400)
        }
        defer { loop.stop() }
        var config = StallWatchConfiguration()
        config.thresholdMs = 100
        config.reportDirectory = directory
        let ended = Recorder<StallReport>()
        // A read found at the first look may be taken for a stall until the loop proves it idle (withdrawn): not
        // one of the two.
        let watchdog = try ThreadWatchdog(threadsNamed: "split-elt-*", configuration: config) { event in
            if case .ended(let report) = event, report.status == .ended { ended.append(report) }
        }
        try watchdog.start()
        defer { watchdog.stop() }
        // Turns that teach the watcher the loop's idle read (each one leaves it and comes back to it).
        for turn in 1...3 {
            loop.send(1)
            #expect(pollUntil { loop.turns.load(ordering: .acquiring) == turn })
            usleep(150_000)
        }
        loop.send(2)
        #expect(pollUntil(timeout: .seconds(10)) { loop.turns.load(ordering: .acquiring) == 4 })
        try #require(
            pollUntil(timeout: .seconds(10), every: .milliseconds(10)) { ended.values.count >= 2 },
            "\(ended.values.count) stalls ended")
        let reports = ended.values.sorted { $0.startedAt < $1.startedAt }
        #expect(reports.count == 2, "\(reports.map { "\($0.durationMs) ms: \($0.notes)" })")
        let first = try #require(reports.first)
        let ending = first.notes.filter { $0.hasPrefix("ended where a look saw the thread go on: ") }
        // The sleep, or the sleep resumed after a capture stopped the thread in it.
        let fromSleep = ["from clock_nanosleep to ", "from a call resumed after a capture's stop"]
        #expect(ending.count == 1 && fromSleep.contains { ending[0].contains($0) }, "\(first.notes)")
        #expect(ending.first?.contains("voluntary switches") == true, "\(first.notes)")
        let last = try #require(reports.last)
        #expect(!last.notes.contains { $0.hasPrefix("ended where a look saw") }, "\(last.notes)")
    }
}
