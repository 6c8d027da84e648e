// StallFollower: the one loop that follows stalls, shared by the embedded watchdog and the sidecar.
import CStallWatchCore

/// Who follows stalls, as notes name it ("the pool watchdog woke 120 ms late during the stall").
package enum Watcher: String, Sendable {
    case watchdog
    case sidecar
    case threadWatchdog = "thread watchdog"
    case poolWatchdog = "pool watchdog"
}

/// Reads a ``ProgressSource``, feeds a ``StallDetector``, and drives a ``StallRecorder`` through each stall:
/// begin (first sample, provisional report), samples while it lasts, escalation to a hang, end (final report).
/// Between looks it waits as the source says.
///
/// The embedded ``Watchdog`` runs one on its thread over the loop's own state; the sidecar runs one over a
/// heartbeat segment or /proc evidence. Late wake-ups and suspends (the detector's guards) become a note in the
/// stall's report and a `lateWakeup` event.
package struct StallFollower<Source: ProgressSource> {
    /// Why ``run(while:)`` returned.
    package enum Outcome: Sendable, Equatable {
        /// The caller's condition turned false; a stall being followed is still open (see
        /// ``StallRecorder/abandon(now:reason:)``).
        case stopped
        /// The source ended (``ProgressReading/ended(reason:notes:)``).
        case sourceEnded
    }

    package private(set) var source: Source
    package let recorder: StallRecorder
    private var detector: StallDetector
    /// Who watches, for notes.
    private let watcher: Watcher
    /// Told true just before a stall's first sample and false once its final report is out.
    private let following: (Bool) -> Void

    /// - Parameters:
    ///   - source: Where progress is read and how to wait.
    ///   - recorder: Samples and reports the stalls.
    ///   - configuration: The detector's thresholds and strategy.
    ///   - watcher: Who watches, for the late wake-up note.
    ///   - following: Called on the watching thread when following a stall starts and stops.
    package init(
        source: Source, recorder: StallRecorder, configuration: StallDetector.Configuration, watcher: Watcher,
        following: @escaping (Bool) -> Void = { _ in }
    ) {
        self.source = source
        self.recorder = recorder
        self.detector = StallDetector(configuration: configuration)
        self.watcher = watcher
        self.following = following
    }

    /// True while a stall is being followed.
    var isFollowing: Bool { detector.current != nil }

    /// What a look asks for next.
    package enum Next: Sendable, Equatable {
        /// Look again at once.
        case lookAgain
        /// Wait as the detector says (and for the next sample, when a stall is followed), then look again.
        case wait(StallDetector.Wait, nextSampleAt: UInt64?)
        /// The source ended; a stall being followed was finished if the source gave a reason.
        case sourceEnded
    }

    /// When to look next at several followers served by one thread (the thread watchdog's, the pool watchdog's):
    /// each look's answer folded in, the earliest deadline kept.
    struct Looks: Sendable, Equatable {
        /// A follower asked to look again at once.
        private(set) var lookAgain = false
        /// The earliest deadline any follower (or other work of the thread) gave; nil while all of them park.
        private(set) var deadline: UInt64?

        init(deadline: UInt64? = nil) { self.deadline = deadline }

        /// Folds one follower's answer; returns false when its source ended (the caller drops it).
        mutating func fold(_ next: Next) -> Bool {
            switch next {
            case .sourceEnded: return false
            case .lookAgain: lookAgain = true
            case .wait(let wait, let nextSampleAt): fold(wait.deadline(nextSampleAt: nextSampleAt))
            }
            return true
        }

        /// Folds a deadline of the thread's own (a rescan, a pool-wide look).
        mutating func fold(_ time: UInt64?) {
            guard let time else { return }
            deadline = min(deadline ?? time, time)
        }
    }

    /// Follows stalls until `keepGoing` returns false (asked before every look) or the source ends, waiting
    /// between looks as the source says. Blocks the calling thread.
    package mutating func run(while keepGoing: () -> Bool) -> Outcome {
        var timedOut = true
        while keepGoing() {
            switch look(timedOut: timedOut) {
            case .sourceEnded: return .sourceEnded
            case .lookAgain: timedOut = false
            case .wait(let wait, let nextSampleAt): timedOut = source.wait(for: wait, nextSampleAt: nextSampleAt)
            }
        }
        return .stopped
    }

    /// One look: reads the source, feeds the detector, drives the recorder through what it reports, and takes
    /// a sample if one is due. A driver of several sources on one thread calls this for each and waits for the
    /// earliest of their deadlines.
    ///
    /// - Parameter timedOut: The wait before this look ran to its deadline (the detector's classic strategy
    ///   counts such waits).
    package mutating func look(timedOut: Bool) -> Next {
        let now = sw_monotonic_ns()
        let snapshot: LoopSnapshot
        let stallEnd: UInt64
        switch source.read(now: now) {
        case .ended(let reason, let notes):
            for note in notes { recorder.addNote(note) }
            if let reason { recorder.abandon(now: now, reason: reason) } else { recorder.flush() }
            following(false)
            return .sourceEnded
        case .progress(let reading, let stallEndNanos, let notes):
            for note in notes { recorder.addNote(note) }
            snapshot = reading
            stallEnd = stallEndNanos
        }
        let observation = StallDetector.Observation(
            snapshot: snapshot, now: now, suspendedNanos: sw_boottime_ns() &- sw_monotonic_ns(),
            stallEndNanos: stallEnd, timedOut: timedOut,
            watcherRunQueueNanos: ThreadSchedule.callingThreadRunQueueWaitNanos())
        var (events, wait) = detector.observe(observation)
        // A late wake-up reported with a stall's beginning is part of that stall's evidence (the stall's own notes
        // say it): its figure is applied after the beginning.
        let beganNow = events.contains { if case .began = $0 { true } else { false } }
        if beganNow {
            let late = events.filter { if case .lateWakeup = $0 { true } else { false } }
            events.removeAll { if case .lateWakeup = $0 { true } else { false } }
            events += late
        }
        var lookAgain = false
        for event in events {
            switch event {
            case .began(let stall):
                // Recorded by the source's own thread meanwhile: the detector ends it at the next look, with no
                // report here (the recorder has no evidence of it).
                guard source.claimStall(stall) else {
                    lookAgain = true
                    continue
                }
                source.stallBegan()
                following(true)
                let current = source
                let thread = source.sampledThread
                recorder.begin(
                    stall, thread: thread, annotations: source.annotations,
                    schedule: source.phaseStartSchedule, now: now,
                    isOngoing: { current.isStillStuck(after: stall.sequence) })
                if thread == nil, let reason = source.unsampledReason { recorder.addNote(reason) }
                // The first sample, and those taken between the threads of the all-thread snapshot: each one a
                // stop whose context switches the source must not count as progress.
                for capture in recorder.captures(from: 0) {
                    source.noteCapture(waitBefore: capture.waitBefore, capturedAt: capture.capturedAt)
                }
                // The loop may have moved on before it saw the follow flag: look again at once.
                lookAgain = source.looksAgainAtOnce
            case .escalated(let stall):
                recorder.escalate(stall)
            case .ended(let stall, let endNanos, _):
                let withdrawal = source.withdrawal
                // No thread held the loop during the stall: the one that took it up ended it, and its figures
                // from the stall's start say whether it waited for a CPU meanwhile.
                if !recorder.hasThread, let taker = source.threadThatTookUp(busyPhase: stall.sequence) {
                    recorder.adoptThreadThatTookUp(taker.threadID, scheduleAtStart: taker.scheduleAtStart)
                }
                source.stallEnded()
                if withdrawal == nil, let endedBy = source.endedBy { recorder.addNote(endedBy) }
                if let withdrawal {
                    recorder.withdraw(endNanos: endNanos, reason: withdrawal)
                } else {
                    recorder.end(endNanos: endNanos)
                }
                following(false)
            case .lateWakeup(let delay):
                if !beganNow {
                    recorder.addNote("the \(watcher.rawValue) woke \(delay / 1_000_000) ms late during the stall")
                }
                recorder.noteLateWakeup(delay)
                recorder.emit(.lateWakeup(delayMs: StallReport.milliseconds(delay)))
            }
        }
        if lookAgain { return .lookAgain }
        // A sample due after the loop moved on would show the time after the stall (a polled source sees the end
        // only at its next look): look now instead, and let the detector end the stall.
        if let stall = detector.current, recorder.isSampleDue(now: sw_monotonic_ns()),
            !source.isStillStuck(after: stall.sequence)
        {
            return .lookAgain
        }
        if detector.current != nil, recorder.sampleIfDue(now: sw_monotonic_ns()) {
            for capture in recorder.captures(from: max(0, recorder.samplesTaken - 1)) {
                source.noteCapture(waitBefore: capture.waitBefore, capturedAt: capture.capturedAt)
            }
            if source.looksAgainAtOnce { return .lookAgain }
        }
        return .wait(wait, nextSampleAt: detector.current != nil ? recorder.nextSampleAt : nil)
    }
}
