// The stall detector: a pure state machine from loop observations and a clock to stall events.

/// Decides from successive observations of a loop's published state whether, and since when, it is stalled.
///
/// Pure: no threads, no clock of its own, no I/O. The ``Watchdog`` feeds it observations and waits as it says;
/// tests feed it a fake clock. Times are nanoseconds on one monotonic clock.
package struct StallDetector: Sendable {
    package enum Strategy: Sendable, Equatable {
        /// Wait exactly until the current busy phase would cross the threshold; park while the loop is idle.
        case deadline
        /// The loop signals on every transition; a stall is `consecutiveTimeouts` timed-out waits of
        /// `threshold / consecutiveTimeouts` each with no progress.
        case classic(consecutiveTimeouts: Int)
    }

    package struct Configuration: Sendable, Equatable {
        package var thresholdNanos: UInt64
        package var hangThresholdNanos: UInt64
        /// A watchdog that wakes later than this past its deadline (or a suspend longer than this) was not
        /// scheduled: judgement is deferred, and a stall that still stands is annotated.
        package var lateWakeupToleranceNanos: UInt64
        /// Whether a late wake-up of the watcher defers judgement (a suspend always does). True where the watcher
        /// shares the loop's fate — a watchdog thread in the loop's own process: a process that was not scheduled
        /// (stopped, frozen) held its loop too, and the loop's own record of its phase start would blame it for
        /// that time. False for a watcher of another process (the sidecar): its lateness says nothing of the
        /// target, whose phase start is the target's own record or the last progress the watcher saw; the stall
        /// is judged at once, noting the lateness (the machine's share is then for the starvation verdict).
        package var lateWakeupDefers = true
        package var strategy: Strategy

        package init(
            thresholdNanos: UInt64 = 250_000_000, hangThresholdNanos: UInt64 = 5_000_000_000,
            lateWakeupToleranceNanos: UInt64 = 50_000_000, strategy: Strategy = .deadline
        ) {
            self.thresholdNanos = thresholdNanos
            self.hangThresholdNanos = max(hangThresholdNanos, thresholdNanos)
            self.lateWakeupToleranceNanos = lateWakeupToleranceNanos
            self.strategy = strategy
        }

        /// The classic strategy's wait between checks.
        var checkIntervalNanos: UInt64 {
            if case .classic(let n) = strategy { return thresholdNanos / UInt64(max(1, n)) }
            return thresholdNanos
        }
    }

    /// What the watchdog saw when it woke.
    package struct Observation: Sendable, Equatable {
        var snapshot: LoopSnapshot
        var now: UInt64
        /// CLOCK_BOOTTIME − CLOCK_MONOTONIC: grows when the machine was suspended.
        var suspendedNanos: UInt64
        /// When the loop left a followed stall, as the loop itself recorded it (0 if not recorded).
        var stallEndNanos: UInt64
        /// The wait ended by timeout rather than by a signal from the loop.
        var timedOut: Bool
        /// How long the watching thread has waited for a CPU in all (its schedstat), when read: a late wake-up
        /// that this wait explains was the machine's other work, not the process going unscheduled.
        var watcherRunQueueNanos: UInt64?

        init(
            snapshot: LoopSnapshot, now: UInt64, suspendedNanos: UInt64 = 0, stallEndNanos: UInt64 = 0,
            timedOut: Bool = true, watcherRunQueueNanos: UInt64? = nil
        ) {
            self.snapshot = snapshot
            self.now = now
            self.suspendedNanos = suspendedNanos
            self.stallEndNanos = stallEndNanos
            self.timedOut = timedOut
            self.watcherRunQueueNanos = watcherRunQueueNanos
        }
    }

    package struct Stall: Sendable, Equatable {
        /// The transition the loop is stuck after.
        package var sequence: UInt64
        package var activity: LoopActivity
        /// When the loop entered the stuck phase.
        package var startNanos: UInt64
        /// When the detector saw the threshold crossed.
        var detectedNanos: UInt64
        /// `detectedNanos` minus the moment the threshold was crossed.
        var latencyNanos: UInt64
        var isHang: Bool
        /// Guard annotations (late watchdog wake-up, suspend) that qualify the stall.
        package var notes: [String]
        /// The stuck phase began no later than the detector's first look: it was already under way when watching
        /// started, so `startNanos` is only the latest it can have begun (a source's lower bound, or that look).
        package var startedBeforeWatching = false
    }

    package enum Event: Sendable, Equatable {
        /// The threshold was crossed.
        case began(Stall)
        /// The stall crossed the hang threshold.
        case escalated(Stall)
        /// The loop moved on; the duration is end − start, exact to the loop's own clock reading.
        case ended(Stall, endNanos: UInt64, durationNanos: UInt64)
        /// The watchdog woke `delayNanos` late (or the machine was suspended): no blame this time.
        case lateWakeup(delayNanos: UInt64)
    }

    /// What the watchdog should do next.
    package enum Wait: Sendable, Equatable {
        /// Sleep until the loop signals an idle → busy edge.
        case park
        /// Sleep until this time (or a signal from the loop).
        case until(UInt64)

        /// When to look again: this wait's time or `nextSampleAt` (a stall's next sample), whichever comes first;
        /// nil when there is neither (park). The one place a wait and a sample time are folded into a deadline.
        package func deadline(nextSampleAt: UInt64?) -> UInt64? {
            switch (self, nextSampleAt) {
            case (.until(let time), let next?): min(time, next)
            case (.until(let time), nil): time
            case (.park, let next): next
            }
        }
    }

    package let configuration: Configuration
    package private(set) var current: Stall?
    private var expectedWake: UInt64?
    private var lastSuspended: UInt64?
    /// Deferred judgement after a late wake-up: the sequence it applies to and when to look again.
    private var grace: (sequence: UInt64, until: UInt64, note: String)?
    /// The last observation found the machine suspended since the one before.
    private var suspendedDuringLook = false
    /// The last observation's late wake-up was the watching thread waiting for a CPU (the machine busy), which
    /// says nothing of the process being stopped: it does not defer judgement.
    private var lateForACPU = false
    private var lastWatcherRunQueue: UInt64?
    private var classicSequence: UInt64?
    private var classicTimeouts = 0
    /// The time of the first observation: nothing before it was watched.
    private var watchingSince: UInt64?

    package init(configuration: Configuration) {
        self.configuration = configuration
    }

    /// Feeds one observation; returns the events it causes and how to wait next.
    package mutating func observe(_ o: Observation) -> (events: [Event], wait: Wait) {
        var events: [Event] = []
        if watchingSince == nil { watchingSince = o.now }
        let lateNote = checkLateWakeup(o, events: &events)

        if let stall = current {
            if o.snapshot.sequence != stall.sequence {
                let end = o.stallEndNanos >= stall.startNanos && o.stallEndNanos != 0 ? o.stallEndNanos : o.now
                events.append(.ended(stall, endNanos: end, durationNanos: end &- stall.startNanos))
                current = nil
                grace = nil
            } else {
                if !stall.isHang, configuration.isHang(durationNanos: o.now &- stall.startNanos) {
                    current!.isHang = true
                    events.append(.escalated(current!))
                }
                return (events, scheduleWake(following: current!, now: o.now))
            }
        }

        let wait: Wait
        switch configuration.strategy {
        case .deadline: wait = observeDeadline(o, lateNote: lateNote, events: &events)
        case .classic(let n): wait = observeClassic(o, required: n, lateNote: lateNote, events: &events)
        }
        return (events, wait)
    }

    private mutating func observeDeadline(_ o: Observation, lateNote: String?, events: inout [Event]) -> Wait {
        let snap = o.snapshot
        guard snap.isBusy else {
            grace = nil
            expectedWake = nil
            return .park
        }
        let crossAt = snap.phaseStartNanos &+ configuration.thresholdNanos
        if o.now < crossAt { return wake(at: crossAt) }
        if let lateNote {
            grace = (snap.sequence, o.now &+ min(configuration.thresholdNanos, 100_000_000), lateNote)
            if (configuration.lateWakeupDefers && !lateForACPU) || suspendedDuringLook { return wake(at: grace!.until) }
        } else if let g = grace, g.sequence == snap.sequence, o.now < g.until {
            return wake(at: g.until)
        }
        return begin(snap, crossAt: crossAt, now: o.now, events: &events)
    }

    private mutating func observeClassic(_ o: Observation, required: Int, lateNote: String?, events: inout [Event])
        -> Wait
    {
        let snap = o.snapshot
        let interval = configuration.checkIntervalNanos
        if !o.timedOut || snap.sequence != classicSequence || !snap.isBusy || lateNote != nil {
            classicSequence = snap.sequence
            classicTimeouts = 0
            return wake(at: o.now &+ interval)
        }
        classicTimeouts += 1
        guard classicTimeouts >= max(1, required) else { return wake(at: o.now &+ interval) }
        classicTimeouts = 0
        return begin(snap, crossAt: snap.phaseStartNanos &+ configuration.thresholdNanos, now: o.now, events: &events)
    }

    private mutating func begin(_ snap: LoopSnapshot, crossAt: UInt64, now: UInt64, events: inout [Event]) -> Wait {
        var notes: [String] = []
        if let g = grace, g.sequence == snap.sequence { notes.append(g.note) }
        grace = nil
        // A phase already under way at the first look crossed the threshold, maybe, before anyone watched: the
        // detector is late only from its own first look.
        let since = watchingSince ?? now
        let onTimeAt = max(crossAt, since)
        var stall = Stall(
            sequence: snap.sequence, activity: snap.activity, startNanos: snap.phaseStartNanos, detectedNanos: now,
            latencyNanos: now > onTimeAt ? now - onTimeAt : 0,
            isHang: configuration.isHang(durationNanos: now &- snap.phaseStartNanos), notes: notes)
        stall.startedBeforeWatching = snap.phaseStartNanos <= since
        current = stall
        events.append(.began(stall))
        return scheduleWake(following: stall, now: now)
    }

    /// While following a stall the detector itself only needs to wake for the hang threshold.
    private mutating func scheduleWake(following stall: Stall, now: UInt64) -> Wait {
        if stall.isHang { return wake(at: now &+ configuration.hangThresholdNanos) }
        return wake(at: stall.startNanos &+ configuration.hangThresholdNanos)
    }

    private mutating func wake(at time: UInt64) -> Wait {
        expectedWake = time
        return .until(time)
    }

    /// The late-wake-up and suspend guards. Returns a note when this observation must not blame the loop.
    private mutating func checkLateWakeup(_ o: Observation, events: inout [Event]) -> String? {
        var delay: UInt64 = 0
        var note: String?
        suspendedDuringLook = false
        lateForACPU = false
        // The watching thread's wait for a CPU since the last observation (nil: unknown).
        let waitedForACPU = o.watcherRunQueueNanos.flatMap { now in
            lastWatcherRunQueue.flatMap { now >= $0 ? now - $0 : nil }
        }
        lastWatcherRunQueue = o.watcherRunQueueNanos
        if o.timedOut, let expected = expectedWake, o.now > expected,
            o.now - expected > configuration.lateWakeupToleranceNanos
        {
            delay = o.now - expected
            if let waited = waitedForACPU, delay <= waited + configuration.lateWakeupToleranceNanos {
                // Runnable all along, queued behind other work: the process was scheduled, the loop's own thread
                // competed for the CPUs too, and its figures say whether that, not the loop, held it up.
                lateForACPU = true
                note =
                    "watchdog woke \(delay / 1_000_000) ms late, \(waited / 1_000_000) ms of it waiting for a CPU: "
                    + "the machine was busy"
            } else {
                note = "watchdog woke \(delay / 1_000_000) ms late: the process may not have been scheduled"
            }
        }
        if let last = lastSuspended, o.suspendedNanos > last,
            o.suspendedNanos - last > configuration.lateWakeupToleranceNanos
        {
            delay = max(delay, o.suspendedNanos - last)
            note = "the machine was suspended for \((o.suspendedNanos - last) / 1_000_000) ms"
            suspendedDuringLook = true
        }
        lastSuspended = o.suspendedNanos
        expectedWake = nil
        if note != nil { events.append(.lateWakeup(delayNanos: delay)) }
        return note
    }
}
