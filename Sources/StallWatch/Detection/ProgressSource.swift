// ProgressSource: where a StallFollower reads a loop's progress, and how it waits for the next change.

/// One reading of a ``ProgressSource``.
package enum ProgressReading: Sendable, Equatable {
    /// The loop's progress now, as the detector reads it.
    ///
    /// - `stallEndNanos`: when the loop left a followed stall, as the loop itself recorded it (0 if it did not).
    /// - `notes`: facts the report of a stall being followed should carry (the source changed, …).
    case progress(LoopSnapshot, stallEndNanos: UInt64 = 0, notes: [String] = [])
    /// The source can no longer be read (the process or the thread exited). A stall being followed gets `notes`
    /// and is finished as `unrecovered` with `reason` as its last note; a nil reason leaves it as it is.
    case ended(reason: String?, notes: [String] = [])
}

/// A source of progress evidence for one watched thread, read by a ``StallFollower`` on its watching thread.
///
/// A source says two things: what the thread's progress looks like now (``read(now:)``: a sequence that moves
/// on every transition, the phase, and when the phase began), and how to wait for the next look
/// (``wait(for:nextSampleAt:)``: the in-process loop state parks on a semaphore while the loop is idle and
/// otherwise sleeps exactly until the deadline; a sidecar polls). Sources today: the in-process loop state
/// (``LoopProgressSource``), a heartbeat segment and /proc evidence (in `StallWatchSidecar`). A process may have
/// several — a Concurrency pool worker's job slot, threads found by name — each with its own follower and
/// detector.
package protocol ProgressSource {
    /// The thread to sample during a stall, with its stack bounds when known; nil while unknown.
    var sampledThread: SampledThread? { get }
    /// Key/values in force now, copied into the report of a stall.
    var annotations: [String: String] { get }
    /// True when a look costs nearly nothing and is exact (the loop's own words): the follower looks again at
    /// once after a stall begins or a sample is taken, to see the end as early as possible. A polled source
    /// (false) waits for its next look instead.
    var looksAgainAtOnce: Bool { get }
    /// The thread's schedule when its current phase began (the last progress seen), when the source reads it: a
    /// stall then has CPU and run-queue figures from its very start, not only from its first sample.
    var phaseStartSchedule: ThreadSchedule? { get }
    /// Set when the stall being followed proved not to be one (its wait is the loop's idle wait): why, for the
    /// note of its report, which is then finished as `withdrawn`. Read when the stall ends.
    var withdrawal: String? { get }
    /// What the look that ended the stall being followed saw, when the loop went on short of its idle wait (a
    /// source that judges progress from counters): a note of its report. Read when the stall ends.
    var endedBy: String? { get }
    /// Why a stall has no thread to sample, when the loop is held by no thread (a queue that waits for a pool
    /// thread to take it): a note of its report. Asked when a stall begins with ``sampledThread`` nil.
    var unsampledReason: String? { get }
    /// For a stall that had no thread to sample: the thread that took the loop up and ended its busy phase
    /// `sequence`, with its schedule at the phase's start when the source read it then. Its run-queue wait over the stall
    /// tells whether the machine held the loop up. Asked when such a stall ends.
    func threadThatTookUp(busyPhase sequence: UInt64) -> (
        threadID: Int32, scheduleAtStart: ThreadSchedule?
    )?

    /// The progress evidence now (`now` on CLOCK_MONOTONIC).
    mutating func read(now: UInt64) -> ProgressReading

    /// Waits until the next look is due: the detector's `wait`, or the next sample (CLOCK_MONOTONIC) when a stall
    /// is being followed, whichever comes first — or earlier, when the source sees a change.
    ///
    /// - Returns: True when the wait ran to its deadline, false when something woke it.
    mutating func wait(for wait: StallDetector.Wait, nextSampleAt: UInt64?) -> Bool

    /// The detector saw `stall` begin: true to follow it, false when the source's thread already recorded it
    /// itself (a pool worker whose job returned just now and reports it late): no stall is opened then.
    mutating func claimStall(_ stall: StallDetector.Stall) -> Bool
    /// A stall began (before its first sample) or ended (before its final report).
    mutating func stallBegan()
    mutating func stallEnded()
    /// A stack sample of the thread was taken (a ptrace stop is a context switch the source must not count).
    mutating func noteCapture()
    /// The same, with the thread's wait read just before the capture (nil: unknown) and when the capture was taken
    /// (CLOCK_MONOTONIC; nil: unknown): a polled source may have missed that the thread was back in its idle wait
    /// when it was captured, and then gives that time as the stall's end.
    mutating func noteCapture(waitBefore: ThreadWait?, capturedAt: UInt64?)
    /// Whether the loop is still stuck after transition `sequence` (the stall's), read without waiting; a
    /// source that cannot tell cheaply says true. Asked during a long all-threads snapshot and before each sample.
    func isStillStuck(after sequence: UInt64) -> Bool
}

extension ProgressSource {
    package var annotations: [String: String] { [:] }
    package var looksAgainAtOnce: Bool { false }
    package var phaseStartSchedule: ThreadSchedule? { nil }
    package var withdrawal: String? { nil }
    package var endedBy: String? { nil }
    package var unsampledReason: String? { nil }
    package func threadThatTookUp(busyPhase sequence: UInt64) -> (
        threadID: Int32, scheduleAtStart: ThreadSchedule?
    )? { nil }
    package mutating func claimStall(_ stall: StallDetector.Stall) -> Bool { true }
    package mutating func stallBegan() {}
    package mutating func stallEnded() {}
    package mutating func noteCapture() {}
    package mutating func noteCapture(waitBefore: ThreadWait?, capturedAt: UInt64?) { noteCapture() }
    package func isStillStuck(after sequence: UInt64) -> Bool { true }
}
