import StallWatchTestSupport
// Drives the pure StallDetector with a fake clock: no threads, no sleeps.
import Testing

@testable import StallWatch

@Suite(.offPool) struct StallDetectorTests {
    let ms: UInt64 = 1_000_000

    func snapshot(_ sequence: UInt64, _ activity: LoopActivity, since start: UInt64) -> LoopSnapshot {
        LoopSnapshot(sequence: sequence, activity: activity, phaseStartNanos: start)
    }

    func began(_ events: [StallDetector.Event]) -> StallDetector.Stall? {
        for case .began(let stall) in events { return stall }
        return nil
    }

    @Test func idleLoopNeverStalls() {
        var detector = StallDetector(configuration: .init(thresholdNanos: 250 * ms))
        for step in 0..<100 {
            let now = UInt64(step) * 1000 * ms
            let (events, wait) = detector.observe(.init(snapshot: snapshot(7, .beforeWaiting, since: 0), now: now))
            #expect(events.isEmpty)
            #expect(wait == .park)
        }
    }

    @Test func busyPhaseWaitsExactlyUntilTheThresholdWouldBeCrossed() {
        var detector = StallDetector(configuration: .init(thresholdNanos: 250 * ms))
        let (events, wait) = detector.observe(
            .init(snapshot: snapshot(3, .beforeSources, since: 1000 * ms), now: 1100 * ms))
        #expect(events.isEmpty)
        #expect(wait == .until(1250 * ms))
    }

    /// A watcher started mid-incident: the phase began before the first look, so the stall is marked as begun
    /// before watching, and the detector is not late for a threshold crossed before it looked.
    @Test func aPhaseUnderWayAtTheFirstLookIsMarkedAndNotCountedLate() throws {
        var detector = StallDetector(configuration: .init(thresholdNanos: 250 * ms, hangThresholdNanos: 5000 * ms))
        let first = detector.observe(.init(snapshot: snapshot(3, .beforeSources, since: 1000 * ms), now: 2500 * ms))
        let stall = try #require(began(first.events))
        #expect(stall.startNanos == 1000 * ms)
        #expect(stall.startedBeforeWatching)
        #expect(stall.latencyNanos == 0)
    }

    @Test func busyPhasePastTheThresholdBeginsOnceAndEndsWithTheExactDuration() throws {
        var detector = StallDetector(configuration: .init(thresholdNanos: 250 * ms, hangThresholdNanos: 5000 * ms))
        // Idle at the first look, then busy from 1000 ms.
        _ = detector.observe(.init(snapshot: snapshot(2, .beforeWaiting, since: 900 * ms), now: 950 * ms))
        let stuck = snapshot(3, .beforeSources, since: 1000 * ms)
        #expect(detector.observe(.init(snapshot: stuck, now: 1100 * ms)).events.isEmpty)
        let first = detector.observe(.init(snapshot: stuck, now: 1251 * ms))
        let stall = try #require(began(first.events))
        #expect(stall.activity == .beforeSources)
        #expect(stall.startNanos == 1000 * ms)
        #expect(stall.latencyNanos == 1 * ms)
        #expect(!stall.startedBeforeWatching)
        #expect(!stall.isHang)
        #expect(first.wait == .until(6000 * ms))  // next: the hang threshold

        // Still stuck: no second `began`.
        let again = detector.observe(.init(snapshot: stuck, now: 1500 * ms))
        #expect(again.events.isEmpty)

        // The loop moved on and recorded its own precise end time.
        let end = detector.observe(
            .init(snapshot: snapshot(4, .beforeWaiting, since: 1000 * ms), now: 1800 * ms, stallEndNanos: 1750 * ms))
        #expect(end.events == [.ended(stall, endNanos: 1750 * ms, durationNanos: 750 * ms)])
        #expect(end.wait == .park)
        #expect(detector.current == nil)
    }

    @Test func stallPastTheHangThresholdEscalatesOnce() throws {
        var detector = StallDetector(configuration: .init(thresholdNanos: 250 * ms, hangThresholdNanos: 1000 * ms))
        let stuck = snapshot(9, .afterWaiting, since: 0)
        _ = try #require(began(detector.observe(.init(snapshot: stuck, now: 300 * ms)).events))
        let hang = detector.observe(.init(snapshot: stuck, now: 1001 * ms))
        guard case .escalated(let stall)? = hang.events.first else {
            Issue.record("expected escalation, got \(hang.events)")
            return
        }
        #expect(stall.isHang)
        #expect(hang.wait == .until(2001 * ms))
        #expect(detector.observe(.init(snapshot: stuck, now: 2001 * ms)).events.isEmpty)
    }

    @Test func lateWakeupDefersJudgementAndProgressClearsIt() {
        var detector = StallDetector(
            configuration: .init(thresholdNanos: 250 * ms, lateWakeupToleranceNanos: 50 * ms))
        let busy = snapshot(5, .beforeSources, since: 0)
        #expect(detector.observe(.init(snapshot: busy, now: 10 * ms)).wait == .until(250 * ms))
        // The watchdog was not scheduled for 2 s: the loop is not blamed yet.
        let late = detector.observe(.init(snapshot: busy, now: 2250 * ms))
        #expect(late.events == [.lateWakeup(delayNanos: 2000 * ms)])
        #expect(late.wait == .until(2350 * ms))
        // The whole process was frozen: once scheduled again the loop moves on, and nothing is reported.
        let after = detector.observe(.init(snapshot: snapshot(8, .beforeWaiting, since: 0), now: 2350 * ms))
        #expect(after.events.isEmpty)
        #expect(detector.current == nil)
    }

    @Test func lateWakeupThenStillStuckBeginsWithANote() throws {
        var detector = StallDetector(
            configuration: .init(thresholdNanos: 250 * ms, lateWakeupToleranceNanos: 50 * ms))
        let busy = snapshot(5, .beforeSources, since: 0)
        _ = detector.observe(.init(snapshot: busy, now: 10 * ms))
        _ = detector.observe(.init(snapshot: busy, now: 1000 * ms))
        let stall = try #require(began(detector.observe(.init(snapshot: busy, now: 1100 * ms)).events))
        #expect(stall.notes.count == 1)
        #expect(stall.notes[0].contains("late"))
    }

    /// A late wake-up the watching thread's own wait for a CPU explains: the process was scheduled, only the
    /// machine was busy, so the loop is judged at once (its own figures say whether the machine held it up), with
    /// the lateness noted. A lateness that wait does not explain (the process stopped) still defers.
    @Test func aLateWakeupSpentWaitingForACPUBeginsAtOnceAndAnUnexplainedOneDefers() throws {
        let configuration = StallDetector.Configuration(thresholdNanos: 250 * ms, lateWakeupToleranceNanos: 50 * ms)
        let busy = snapshot(5, .beforeSources, since: 0)
        var detector = StallDetector(configuration: configuration)
        _ = detector.observe(.init(snapshot: busy, now: 10 * ms, watcherRunQueueNanos: 1_000 * ms))
        let late = detector.observe(.init(snapshot: busy, now: 400 * ms, watcherRunQueueNanos: 1_140 * ms))
        #expect(late.events.first == .lateWakeup(delayNanos: 150 * ms))
        let stall = try #require(began(late.events))
        #expect(stall.notes.count == 1 && stall.notes[0].contains("140 ms of it waiting for a CPU"), "\(stall.notes)")

        var stopped = StallDetector(configuration: configuration)
        _ = stopped.observe(.init(snapshot: busy, now: 10 * ms, watcherRunQueueNanos: 1_000 * ms))
        let frozen = stopped.observe(.init(snapshot: busy, now: 400 * ms, watcherRunQueueNanos: 1_010 * ms))
        #expect(frozen.events == [.lateWakeup(delayNanos: 150 * ms)])
        #expect(frozen.wait == .until(500 * ms))
        #expect(stopped.current == nil)
    }

    /// A watcher of another process: its own lateness is no evidence about the loop, which is judged at once
    /// with the lateness noted; a suspend of the whole machine still defers judgement.
    @Test func aWatcherThatDoesNotShareTheLoopsFateBeginsAtOnceAfterALateWakeupButNotAfterASuspend() throws {
        var configuration = StallDetector.Configuration(thresholdNanos: 250 * ms, lateWakeupToleranceNanos: 50 * ms)
        configuration.lateWakeupDefers = false
        var detector = StallDetector(configuration: configuration)
        let busy = snapshot(5, .beforeSources, since: 0)
        #expect(detector.observe(.init(snapshot: busy, now: 10 * ms)).wait == .until(250 * ms))
        let late = detector.observe(.init(snapshot: busy, now: 330 * ms))
        #expect(late.events.first == .lateWakeup(delayNanos: 80 * ms))
        let stall = try #require(began(late.events))
        #expect(stall.startNanos == 0)
        #expect(stall.notes.count == 1 && stall.notes[0].contains("80 ms late"), "\(stall.notes)")

        var suspended = StallDetector(configuration: configuration)
        _ = suspended.observe(.init(snapshot: busy, now: 10 * ms, suspendedNanos: 0, timedOut: false))
        let resumed = suspended.observe(
            .init(snapshot: busy, now: 260 * ms, suspendedNanos: 30_000 * ms, timedOut: false))
        #expect(resumed.events == [.lateWakeup(delayNanos: 30_000 * ms)])
        #expect(suspended.current == nil)
    }

    @Test func suspendIsTreatedLikeALateWakeup() {
        var detector = StallDetector(configuration: .init(thresholdNanos: 250 * ms))
        let busy = snapshot(5, .beforeSources, since: 0)
        _ = detector.observe(.init(snapshot: busy, now: 10 * ms, suspendedNanos: 0, timedOut: false))
        let result = detector.observe(
            .init(snapshot: busy, now: 260 * ms, suspendedNanos: 30_000 * ms, timedOut: false))
        #expect(result.events == [.lateWakeup(delayNanos: 30_000 * ms)])
        #expect(detector.current == nil)
    }

    @Test func classicStrategyNeedsNConsecutiveTimeoutsWithoutProgress() throws {
        var detector = StallDetector(
            configuration: .init(thresholdNanos: 250 * ms, strategy: .classic(consecutiveTimeouts: 5)))
        let busy = snapshot(11, .beforeSources, since: 0)
        var now: UInt64 = 0
        // The first observation of a sequence only arms the counter.
        #expect(detector.observe(.init(snapshot: busy, now: now)).wait == .until(50 * ms))
        for _ in 1..<5 {
            now += 50 * ms
            #expect(detector.observe(.init(snapshot: busy, now: now)).events.isEmpty)
        }
        now += 50 * ms
        let stall = try #require(began(detector.observe(.init(snapshot: busy, now: now)).events))
        #expect(stall.sequence == 11)
    }

    @Test func classicStrategyResetsOnAnySignalFromTheLoop() {
        var detector = StallDetector(
            configuration: .init(thresholdNanos: 250 * ms, strategy: .classic(consecutiveTimeouts: 3)))
        var now: UInt64 = 0
        var sequence: UInt64 = 1
        for step in 0..<40 {
            now += 50 * ms
            // Every other wait is ended by the loop's signal (a transition): never three timeouts in a row.
            if step % 2 == 0 { sequence += 1 }
            let o = StallDetector.Observation(
                snapshot: snapshot(sequence, .beforeSources, since: 0), now: now, timedOut: step % 2 == 1)
            #expect(detector.observe(o).events.isEmpty)
        }
    }
}
