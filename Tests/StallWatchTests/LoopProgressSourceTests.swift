// The in-process loop's progress source: a park asked for on a stale idle view returns while the loop is busy; the
// lead-up reads an idle loop's thread once.
import CStallWatchCore
import Dispatch
import Foundation
import StallWatchTestSupport
import Testing

@testable import StallWatch

@Suite(.offPool) struct LoopProgressSourceTests {
    /// The detector asks for a park when it last saw the loop idle; if the loop turned busy before the wait read its
    /// sequence, no later move shows it. With the lead-up's ticks between looks the wait kept ticking for as long
    /// as the loop stayed busy — a stall unseen until it ended. The wait returns instead, so the detector looks
    /// again.
    @Test(.timeLimit(.minutes(2)))
    func aParkAskedForWhileTheLoopIsAlreadyBusyReturnsToTheDetector() throws {
        let loop = try EventLoop(name: "stale-idle", mainQueue: .disabled)
        let ring = try #require(loop.state.startLeadUp(StallWatchConfiguration().leadUpSettings))
        let release = DispatchSemaphore(value: 0)
        let busy = DispatchSemaphore(value: 0)
        _ = startLoopThread(loop)
        loop.perform {
            busy.signal()
            release.wait()
        }
        busy.wait()
        #expect(loop.state.snapshot().isBusy)
        let source = LoopProgressSource(loop: loop, leadUp: LeadUpRecorder(ring: ring)) { false }
        // Without the rule the wait would last as long as the loop stays busy: 10 s here.
        DispatchQueue.global().asyncAfter(deadline: .now() + 10) { release.signal() }
        let clock = ContinuousClock()
        let started = clock.now
        let timedOut = source.wait(for: .park, nextSampleAt: nil)
        let waited = clock.now - started
        loop.stop()
        #expect(waited < .seconds(5), "the wait kept ticking while the loop was busy: \(waited)")
        #expect(!timedOut, "a return to look again, not a timeout")
    }

    /// A classic-strategy watcher is signalled for every transition, so it may wake thousands of times in one idle
    /// wait of a busy loop (the signals of a burst). The lead-up reads the loop thread's figures from /proc once
    /// per idle wait, not at every wake-up: a thousand ticks in the same idle wait take one reading, and the next
    /// idle wait (after a transition) one more.
    @Test func anIdleLoopsThreadIsReadOncePerIdleWaitHoweverOftenTheWatcherTicks() throws {
        let loop = try EventLoop(name: "idle-ticks", mainQueue: .disabled)
        let ring = try #require(loop.state.startLeadUp(StallWatchConfiguration().leadUpSettings))
        let recorder = LeadUpRecorder(ring: ring)
        let thread = sw_gettid()
        let start = sw_monotonic_ns()
        // A busy tick, then the loop idle at sequence 2: all within one bucket, so only the idle rule reads.
        _ = recorder.tick(now: start, threadID: thread, sequence: 1, isBusy: true)
        let first = recorder.readingsTaken
        for i in 0..<1000 { _ = recorder.tick(now: start + UInt64(i), threadID: thread, sequence: 2, isBusy: false) }
        #expect(recorder.readingsTaken == first + 1, "\(recorder.readingsTaken - first) readings in one idle wait")
        _ = recorder.tick(now: start + 2000, threadID: thread, sequence: 3, isBusy: false)
        for i in 0..<1000 {
            _ = recorder.tick(now: start + 3000 + UInt64(i), threadID: thread, sequence: 3, isBusy: false)
        }
        #expect(recorder.readingsTaken == first + 2, "\(recorder.readingsTaken - first) readings in two idle waits")
    }
}
