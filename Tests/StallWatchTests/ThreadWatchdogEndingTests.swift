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
    /// such note — or, when a look comes just as the wait returns, with one that says the thread went on from it
    /// having done nothing else.
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
        loop.sitInRead()
        let events = ThreadWatchdogWithdrawalTests.WatchedEvents()
        let watchdog = try events.watch("split-elt-*", directory: directory)
        defer { watchdog.stop() }
        // The premise: the watcher knows the loop's read as its idle wait. Its first look finds the thread in the
        // read and, knowing nothing yet, reports it as a stall; a turn then proves the read idle and that report is
        // withdrawn (the withdrawal tests' subject). A busy test process may delay that first look: the turns wait
        // for it.
        let turns = try loop.turnUntilTheReadIsLearned(events)
        // Any other stall so far (none is expected) is not one of the two.
        let endedBefore = events.endedNotWithdrawn.count
        loop.send(2)
        #expect(pollUntil(timeout: .seconds(10)) { loop.turns.load(ordering: .acquiring) == turns + 1 })
        try #require(
            pollUntil(timeout: .seconds(10), every: .milliseconds(10)) {
                events.endedNotWithdrawn.count >= endedBefore + 2
            }, "\(events.ended.values.map { "\($0.status) \($0.durationMs) ms: \($0.notes)" })")
        let reports = events.endedNotWithdrawn.dropFirst(endedBefore).sorted { $0.startedAt < $1.startedAt }
        #expect(reports.count == 2, "\(reports.map { "\($0.durationMs) ms: \($0.notes)" })")
        let first = try #require(reports.first)
        let ending = first.notes.filter { $0.hasPrefix("ended where a look saw the thread go on: ") }
        // The sleep, or the sleep resumed after a capture stopped the thread in it.
        let fromSleep = ["from clock_nanosleep to ", "from a call resumed after a capture's stop"]
        #expect(ending.count == 1 && fromSleep.contains { ending[0].contains($0) }, "\(first.notes)")
        #expect(ending.first?.contains("voluntary switches") == true, "\(first.notes)")
        // The second ends at the idle read, or where a look saw the thread just out of its wait on the way back to
        // it (runnable, nothing done since): never at other work.
        let last = try #require(reports.last)
        let lastEnding = last.notes.filter { $0.hasPrefix("ended where a look saw the thread go on: ") }
        #expect(
            lastEnding.allSatisfy {
                $0.contains(" to user space or the kernel (running); ")
                    && $0.contains("0 voluntary switches, 0 reads and 0 writes completed")
            }, "\(last.notes)")
    }
}
