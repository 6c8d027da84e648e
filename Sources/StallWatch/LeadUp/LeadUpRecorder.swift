// LeadUpRecorder: the watching side of one loop's lead-up: the loop thread's scheduler readings and window copies.
import Synchronization

/// A copy of one loop's lead-up at one moment: what a report's `leadUp` section is built from
/// (``LeadUpSectionBuilder``).
package struct LeadUpCapture: Sendable {
    package var window: LeadUpWindow
    /// What the window's label ids are.
    package var labels: LeadUpLabelKind = .interned
    /// The loop thread's stacks taken in the window, oldest first.
    package var stacks: [LeadUpStackSample] = []
    /// How they were taken (nil: no stacks are recorded).
    package var stackOrigin: LeadUpStackOrigin?
    /// Where the kernel's samples among `stacks` get the callers their frame-pointer chains skipped
    /// (``LeadUpStacks/resolvingLeaves(_:)``), when the report is built.
    package var leaves: LeadUpStacks?
}

/// What the label ids of a lead-up's rings stand for.
package enum LeadUpLabelKind: Sendable, Equatable {
    /// Ids of ``LeadUpLabels/shared`` (a loop's items).
    case interned
    /// Task ids (a Concurrency pool worker's jobs; 0: a job that is no task).
    case taskIDs

    /// The text of label `id`.
    func text(for id: UInt32) -> String? {
        switch self {
        case .interned: LeadUpLabels.shared.text(for: id)
        case .taskIDs: id == 0 ? nil : "task \(id)"
        }
    }
}

/// Keeps one loop's lead-up on the watching thread: the loop thread's run-queue wait, CPU time and context
/// switches once a bucket while the loop is active (the loop itself writes its items into the ring), and copies of
/// the window for reports.
///
/// ``tick(now:threadID:sequence:isBusy:)`` runs on the watching thread between its waits and says when it wants to run
/// again (nil while the loop idles: the watcher then parks as before, with no wake-ups).
/// ``capture(endingAt:)`` may run on any thread.
package final class LeadUpRecorder: Sendable {
    package let ring: LeadUpRing
    /// What the ring's label ids are.
    package let labels: LeadUpLabelKind
    /// The loop thread's stacks (nil: none recorded).
    package let stacks: LeadUpStacks?
    /// Samples the loop thread for the stacks when the kernel's ring is not used; nil when it cannot be sampled
    /// now (a stall is being followed: its own samples cover it). On the watching thread.
    private let sampleLoopThread: (@Sendable () -> [UnwoundFrame]?)?

    private struct State {
        /// The last scheduler reading of the loop thread.
        var lastReading: (threadID: Int32, schedule: ThreadSchedule, voluntary: UInt64, involuntary: UInt64)?
        var nextReading: UInt64 = 0
        /// The loop's sequence at the last tick: a loop that made no transition since is idle.
        var lastSequence: UInt64 = .max
        /// The sequence of the idle wait last read for: one reading per idle wait, however often the watcher
        /// wakes in it (a classic-strategy watcher wakes for every transition the loop made meanwhile).
        var idleReadSequence: UInt64 = .max
        /// Readings taken so far.
        var readings = 0
    }
    private let state = Mutex(State())

    /// How far the detector's next look must be for the stacks' work to be done in a tick: 50 ms, the late
    /// wake-up tolerance's default, so that work would have to take twice that to defer a judgement.
    package static let stackWorkMarginNanos: UInt64 = 50_000_000

    /// How many scheduler readings of the loop thread the recorder has taken.
    package var readingsTaken: Int { state.withLock { $0.readings } }

    /// - Parameters:
    ///   - ring: The loop's rings (``LoopState/startLeadUp(_:)``).
    ///   - stacks: How the loop thread's stacks are recorded (`.off`: not at all).
    ///   - sampleLoopThread: Takes one sample of the loop thread, for the stacks' sampler mode.
    ///   - labels: What the ring's label ids are.
    package init(
        ring: LeadUpRing, stacks mode: LeadUpStackMode = .off,
        sampleLoopThread: (@Sendable () -> [UnwoundFrame]?)? = nil, labels: LeadUpLabelKind = .interned
    ) {
        self.ring = ring
        self.labels = labels
        self.stacks = mode == .off ? nil : LeadUpStacks(mode: mode, bucketNanos: ring.settings.bucketNanos)
        self.sampleLoopThread = sampleLoopThread
    }

    /// Reads the loop thread's scheduler figures when a bucket has passed (and once more when the loop went idle).
    ///
    /// - Returns: When to tick again; nil when the loop made no transition since the last tick and is idle.
    /// - Parameters:
    ///   - sequence: The loop's transition count now; the same as at the last tick means it made no transition.
    ///   - isBusy: Whether the loop is inside an item (not waiting) now.
    ///   - lookDue: When the detector looks at the loop next (nil: it parks until the loop moves). The stacks'
    ///     work (opening the kernel's ring, a sampler sample) is done only when that is at least
    ///     ``stackWorkMarginNanos`` away, so that it never makes the detector's look late: a late look defers a
    ///     stall's judgement, and its first sample.
    package func tick(now: UInt64, threadID: Int32?, sequence: UInt64, isBusy: Bool, lookDue: UInt64? = nil) -> UInt64?
    {
        if let stacks, lookDue.map({ $0 > now && $0 - now >= Self.stackWorkMarginNanos }) ?? true {
            if let threadID { stacks.attach(threadID: threadID) }
            if isBusy, stacks.wantsSample(now: now), let frames = sampleLoopThread?() {
                stacks.record(frames, at: now)
            }
        }
        return state.withLock { state -> UInt64? in
            let moved = sequence != state.lastSequence
            state.lastSequence = sequence
            let wentIdle = !moved && !isBusy && state.idleReadSequence != sequence
            if let threadID, now >= state.nextReading || wentIdle {
                read(threadID, now: now, &state)
                state.nextReading = now &+ ring.settings.bucketNanos
                if !isBusy { state.idleReadSequence = sequence }
            }
            guard moved || isBusy else { return nil }
            return state.nextReading
        }
    }

    /// Adds the loop thread's run-queue wait, CPU time and context switches since the last reading to the bucket
    /// of `now`.
    private func read(_ threadID: Int32, now: UInt64, _ state: inout State) {
        let directory = ProcDirectory.current.thread(threadID)
        state.readings += 1
        guard let schedule = directory.schedstat(now: now) else { return }
        let status = directory.status()
        let voluntary = status?.voluntarySwitches ?? 0, involuntary = status?.involuntarySwitches ?? 0
        defer { state.lastReading = (threadID, schedule, voluntary, involuntary) }
        guard let last = state.lastReading, last.threadID == threadID else { return }
        ring.addSchedule(
            at: now, runQueueWaitNanos: schedule.runQueueWaitNanos &- last.schedule.runQueueWaitNanos,
            cpuNanos: schedule.cpuNanos &- last.schedule.cpuNanos,
            voluntary: UInt32(clamping: voluntary &- last.voluntary),
            involuntary: UInt32(clamping: involuntary &- last.involuntary))
    }

    /// The last scheduler reading of thread `threadID` (when it was taken: its `monotonicNanos`), if any.
    package func lastSchedule(of threadID: Int32) -> ThreadSchedule? {
        state.withLock { state in
            state.lastReading.flatMap { $0.threadID == threadID ? $0.schedule : nil }
        }
    }

    /// Copies the window that ends at `end` (CLOCK_MONOTONIC).
    package func capture(endingAt end: UInt64) -> LeadUpCapture {
        let window = ring.window(endingAt: end)
        guard let stacks else { return LeadUpCapture(window: window, labels: labels) }
        return LeadUpCapture(
            window: window, labels: labels, stacks: stacks.samples(from: window.startNanos, to: end),
            stackOrigin: stacks.origin,
            leaves: stacks)
    }
}
