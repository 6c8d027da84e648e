// StallRecorder: follows one detected stall: evidence in on the watching thread, reports out on its report queue.
import CStallWatchCore
import Foundation
import Synchronization

/// Follows one stall at a time, a pipeline whose data flows one way:
///
/// ```
/// watching thread                        report queue (ReportWorker)            line-fill queue (LineFiller)
/// EvidenceCollector ── evidence ───────▶ StallReportBuilder ─▶ StallPublisher ─▶ lines filled in, rewritten
///   └ provisional report (names only) ─▶ written
/// ```
///
/// On the watching thread the ``EvidenceCollector`` samples the stuck thread at detection and then every
/// `sampleIntervalMs` (at most `maxSamples`; less often for a signature reported recently), and the provisional
/// report is built from the first sample with names only, so it is on disk within a few ms. Everything after
/// that happens in the ``ReportWorker``, which gets the evidence as a value and owns the report files, the
/// fold of repeats and the symbolicators of final reports: provisional rewrites while the stall lasts, and the
/// final report at its end, which lands after them. Each stage owns its state; the watching thread never waits for
/// the report queue, except when the watching stops.
package final class StallRecorder: @unchecked Sendable {  // Used by one watching thread only, after hand-off.
    let configuration: StallWatchConfiguration
    /// What is watched and how it is sampled (this process by signal, or another one by ptrace).
    let target: Target
    /// Names only (no DWARF line tables, whose first load can take tens of ms), on the watching thread: the
    /// provisional report that must be on disk within a few ms of detection, and the signature annealing looks up.
    let quickSymbolicator: Symbolicator
    /// The listener's handler, called one event at a time (`ended` comes from the report queue).
    private let serialEmit: @Sendable (StallEvent) -> Void
    private var collector: EvidenceCollector
    let builder: StallReportBuilder
    /// The report stage: everything after the evidence, off the watching thread.
    let reports: ReportWorker
    /// When the next sample of the followed stall is due (CLOCK_MONOTONIC), nil when none is.
    package var nextSampleAt: UInt64? { collector.nextSampleAt }
    private static let counter = Counter()
    /// When the provisional report was last written (CLOCK_MONOTONIC).
    private var lastProvisionalAt: UInt64 = 0
    /// The report queue: writes and final reports, in order.
    var writes: DispatchQueue { reports.queue }
    /// The watched loop's lead-up, copied into each stall's evidence at detection; set before watching starts.
    package var leadUp: LeadUpRecorder?

    /// A recorder for a loop of this process, sampled by signal.
    convenience init(
        configuration: StallWatchConfiguration, loopName: String, emit: @escaping @Sendable (StallEvent) -> Void
    ) {
        self.init(configuration: configuration, loopName: loopName, target: .inProcess(), emit: emit)
    }

    /// A recorder for `target`'s loop.
    ///
    /// - Parameters:
    ///   - configuration: Thresholds, sampling, symbolication and report settings.
    ///   - detector: The thresholds stalls are judged by, when not the configuration's (a heartbeat's own).
    ///   - loopName: The loop's name in reports.
    ///   - target: The process, how it is sampled and how its stalls were detected.
    ///   - emit: Called for every stall event, one at a time: on the calling thread, except `ended`, which comes
    ///     from the recorder's report queue once the final report is written.
    ///   - quickSymbolicator: A names-only symbolicator of `target` used by this recorder's thread alone, already
    ///     set up (shared by the recorders of one watchdog thread); nil makes one.
    package init(
        configuration: StallWatchConfiguration, detector: StallDetector.Configuration? = nil, loopName: String,
        target: Target, emit: @escaping @Sendable (StallEvent) -> Void, quickSymbolicator shared: Symbolicator? = nil
    ) {
        self.configuration = configuration
        self.target = target
        let emitLock = Mutex(())
        let serialEmit: @Sendable (StallEvent) -> Void = { event in emitLock.withLock { _ in emit(event) } }
        self.serialEmit = serialEmit
        if let shared, shared.mode == .fast, configuration.symbolication != .off {
            quickSymbolicator = shared
        } else {
            quickSymbolicator = Symbolicator(
                processID: target.processID,
                mode: configuration.symbolication == .full ? .fast : configuration.symbolication)
        }
        collector = EvidenceCollector(configuration: configuration, target: target)
        builder = StallReportBuilder(
            configuration: configuration, detector: detector, loopName: loopName,
            detectionSource: target.detectionSource,
            process: target.process, phaseKnown: target.phaseKnown,
            captureMethod: target.sampler?.captureMethod ?? .none, clock: { sw_monotonic_ns() })
        reports = ReportWorker(
            configuration: configuration, builder: builder, processID: target.processID, emit: serialEmit)
    }

    /// Passes `event` to the listener, never two at once.
    func emit(_ event: StallEvent) { serialEmit(event) }

    var isFollowing: Bool { collector.evidence != nil }
    /// Samples of the stuck thread taken so far in the stall being followed (0 when none is).
    package var samplesTaken: Int { collector.evidence?.samples.count ?? 0 }
    /// The `task` and `pool` sections the next stall's report carries (set by the pool watchdog before it begins).
    var nextTask: StallReport.TaskDescription?
    var nextPool: StallReport.PoolDescription?

    /// Loads the shared symbol table of the process's own image (the largest) when the watching starts rather
    /// than at the first stall. On the report queue, not the watching thread, which must look at its loop at
    /// once: on a loaded machine the load took over a second, and a stall that began meanwhile was seen late or
    /// not at all. A stall that begins before the table is loaded gets its provisional names later (``begin``).
    func warmUp() {
        let here = UInt64(
            UInt(bitPattern: unsafeBitCast(sw_monotonic_ns as @convention(c) () -> UInt64, to: UnsafeRawPointer.self)))
        reports.warmUp(address: here)
    }

    // MARK: Lifecycle of one stall

    /// A stall began on `thread` of the target (detected at `now`, CLOCK_MONOTONIC): first sample, all
    /// threads' state, provisional report.
    func begin(
        _ stall: StallDetector.Stall, thread: SampledThread?, annotations: [String: String],
        schedule: ThreadSchedule? = nil, now: UInt64, isOngoing: () -> Bool = { true }
    ) {
        let reportID = Self.makeID(wallNanos: sw_realtime_ns())
        // Another process may exit mid-stall, or before the report queue (behind a report's fsyncs on a busy disk)
        // gets to this stall: its images are read right after the first sample, while it surely runs, and go to
        // the report's symbolicator, so the final report keeps its symbols and images.
        // The lead-up as of detection, copied before the evidence is gathered: the all-thread snapshot can take
        // seconds on a loaded machine, by which time the stuck item may have ended and no longer be in flight.
        let leadUpAtDetection = leadUp?.capture(endingAt: now)
        var images: Symbolicator.ImageSnapshot?
        collector.begin(
            stall, thread: thread, annotations: annotations, schedule: schedule, reportID: reportID, now: now,
            isOngoing: isOngoing
        ) { first in
            guard target.processID != getpid() else { return }
            images = quickSymbolicator.imageSnapshot(for: first.map(\.address))
        }
        if let images { reports.adoptImages(images) }
        collector.attach(task: nextTask, pool: nextPool)
        if let leadUpAtDetection { collector.attach(leadUp: leadUpAtDetection) }
        guard let evidence = collector.evidence else { return }
        // Annealing: a stall that looks like one reported recently is sampled less often. (A signature seen
        // recently has its tables loaded: the report of that stall loaded them.)
        let first = evidence.samples.first?.frames ?? []
        let (firstSignature, _) = withoutWaitingForNames {
            StallSignature.compute(stack: quickSymbolicator.symbolicate(first))
        }
        collector.slowDown(by: reports.samplingScale(signature: firstSignature, now: now), now: now)
        if let report = provisional() { emit(.began(report)) }
        if target.processID != getpid() {
            // The images of the other threads' stacks too, which the provisional report just read.
            let addresses = evidence.threads.flatMap { $0.frames.map(\.address) }
            if let threads = quickSymbolicator.imageSnapshot(for: addresses) { reports.adoptImages(threads) }
            reports.prepareSymbols(for: first.map(\.address))
        }
        lastProvisionalAt = now
        emit(
            .sampled(
                reportID: reportID, index: 0,
                pauseMicros: evidence.samples.first?.pauseNanos.map(StallReport.microseconds)))
        for (index, sample) in evidence.samples.enumerated().dropFirst() {
            emit(
                .sampled(reportID: reportID, index: index, pauseMicros: sample.pauseNanos.map(StallReport.microseconds))
            )
        }
        // The line tables of the first sample's and the other threads' frames load in the background while the
        // stall goes on, so the final report has the lines at once when they are ready by the stall's end (the
        // first DWARF load of an image takes tens to hundreds of ms); what is not is filled in afterwards.
        if configuration.symbolication == .full {
            reports.prefetchLines(
                [first] + evidence.threads.map { Array($0.frames.prefix(configuration.maxThreadFrames)) })
        }
    }

    /// Waits until the lines of every final report written so far are filled in (and their files rewritten).
    /// Called when the watching stops, so a service that exits after stopping leaves complete reports.
    package func waitForLineFills() { reports.waitForLineFills() }

    /// Each sample of the followed stall from index `start` on: the wait the stuck thread was in at the capture —
    /// the call the stop found it in, else the wait its probe read just before — and when the capture was taken. A
    /// thread read running that entered its idle wait before the stop landed was back idle: the stop says so.
    func captures(from start: Int) -> [(waitBefore: ThreadWait?, capturedAt: UInt64?)] {
        guard let samples = collector.evidence?.samples, start < samples.count else { return [] }
        return samples[start...].map { ($0.stopWait ?? $0.probe?.wait, $0.capturedAtNanos) }
    }

    /// Whether a sample of the stall being followed is due at `now`.
    func isSampleDue(now: UInt64) -> Bool { collector.nextSampleAt.map { now >= $0 } ?? false }

    /// Takes a sample if one is due; returns true if it did.
    @discardableResult
    func sampleIfDue(now: UInt64) -> Bool {
        guard let due = collector.nextSampleAt, now >= due else { return false }
        guard let sample = collector.takeSample(now: now), let evidence = collector.evidence else { return true }
        emit(
            .sampled(
                reportID: evidence.reportID, index: evidence.samples.count - 1,
                pauseMicros: sample.pauseNanos.map(StallReport.microseconds)))
        // A hang that never ends (killed by systemd's WatchdogSec=, the OOM killer) keeps its samples on disk.
        if now &- lastProvisionalAt >= Self.provisionalRewriteNanos { rewriteProvisional(now: now) }
        return true
    }

    /// How often the provisional report of a stall in progress is rewritten with the samples so far.
    static let provisionalRewriteNanos: UInt64 = 500_000_000

    /// Has the provisional report rebuilt with every sample so far and written over the last one, on the report
    /// queue: building and the write's fsyncs must not delay the next samples. One rewrite at a time; the final
    /// report lands after a pending one.
    private func rewriteProvisional(now: UInt64) {
        lastProvisionalAt = now
        guard let evidence = collector.evidence else { return }
        reports.rewriteProvisional(evidence)
    }

    func escalate(_ stall: StallDetector.Stall) {
        collector.escalate(stall)
        if let report = provisional() { emit(.escalated(report)) }
    }

    /// The stall ended: its final report is built, written and emitted on the report queue, so the watching thread
    /// goes back to the loop at once and sees a stall that starts meanwhile.
    package func end(endNanos: UInt64) {
        finish(status: .ended, endNanos: endNanos, now: endNanos, waiting: false)
    }

    /// The watching is stopping while the loop is still stuck (`reason` replaces the default note). Returns once
    /// every report of this recorder is written, this one included.
    /// Finishes the stall being followed as `withdrawn` (``StallReport/Status/withdrawn``): the wait it was judged
    /// stuck in proved to be the loop's idle wait; `reason` becomes a note of the report.
    package func withdraw(endNanos: UInt64, reason: String) {
        collector.addNote(reason)
        finish(status: .withdrawn, endNanos: endNanos, now: endNanos, waiting: false)
    }

    package func abandon(now: UInt64, reason: String? = nil) {
        guard collector.evidence != nil else { return flush() }
        collector.addNote(reason ?? "the watchdog stopped while the loop was still stuck")
        finish(status: .unrecovered, endNanos: nil, now: now, waiting: true)
    }

    /// Waits until the final reports of ended stalls are written (and their `ended` events emitted).
    package func flush() { reports.flush() }

    func addNote(_ note: String) { collector.addNote(note) }

    /// Whether the stall being followed has a thread (false: none held the loop when it began).
    var hasThread: Bool { collector.hasThread }

    /// The stall being followed had no thread: `threadID` took the loop up and ended it (see
    /// ``EvidenceCollector/adoptThreadThatTookUp(_:scheduleAtStart:)``).
    func adoptThreadThatTookUp(_ threadID: Int32, scheduleAtStart: ThreadSchedule?) {
        collector.adoptThreadThatTookUp(threadID, scheduleAtStart: scheduleAtStart)
    }

    /// A stall nobody followed: its thread timed it itself (a pool job that crossed the threshold and returned
    /// before the watchdog looked at its worker). One final report, with the exact duration and no samples,
    /// published and emitted on the report queue after the work queued before it; the stall being followed, if
    /// any, is left as it is.
    func recordUnsampled(
        _ stall: StallDetector.Stall, threadID: Int32, endNanos: UInt64, task: StallReport.TaskDescription?,
        cause: StallReport.Cause, notes: [String]
    ) {
        let wall = sw_realtime_ns()
        let now = sw_monotonic_ns()
        var evidence = StallEvidence(
            stall: stall, threadID: threadID, reportID: Self.makeID(wallNanos: wall), wallAtBegin: wall,
            monoAtBegin: now, intervalNanos: configuration.intervals.sampleInterval)
        evidence.notes += notes
        evidence.setupErrors = target.setupErrors
        evidence.task = task
        var report = builder.build(
            evidence, status: .ended, endNanos: endNanos, final: true, now: now, symbols: quickSymbolicator)
        report.cause = cause
        reports.publishFinal(report, now: now)
    }

    /// The watcher woke `delayNanos` later than it asked during the stall: evidence of a starved machine.
    func noteLateWakeup(_ delayNanos: UInt64) { collector.noteLateWakeup(delayNanos) }

    // MARK: Reports

    /// Builds the provisional report (at detection, or on escalation to a hang: the first sample only, to be
    /// quick) and has it written on the report queue.
    private func provisional() -> StallReport? {
        guard let evidence = collector.evidence else { return nil }
        let (report, namesPending) = withoutWaitingForNames {
            builder.build(evidence, status: .ongoing, endNanos: nil, final: false, now: nil, symbols: quickSymbolicator)
        }
        reports.publishProvisional(report)
        // Written at once without some names: rewritten with them on the report queue, which loads their tables.
        if namesPending { rewriteProvisional(now: sw_monotonic_ns()) }
        return report
    }

    /// Runs `body` with the quick symbolicator not waiting for symbol tables to load (the first lookup in an
    /// image loads its table: tens of ms, ten times that on a loaded machine, a gap in the stall's samples);
    /// returns its result and whether some frame was left without a name.
    private func withoutWaitingForNames<T>(_ body: () -> T) -> (T, namesPending: Bool) {
        let pendingBefore = quickSymbolicator.pendingNameLookups
        quickSymbolicator.waitsForNames = false
        defer { quickSymbolicator.waitsForNames = true }
        let result = body()
        return (result, quickSymbolicator.pendingNameLookups != pendingBefore)
    }

    /// Closes the stall's evidence and hands it to the report queue for its final report (after any rewrite of
    /// its provisional report, so the final one lands last); with `waiting`, returns once it is written.
    private func finish(status: StallReport.Status, endNanos: UInt64?, now: UInt64, waiting: Bool) {
        if let endNanos { collector.dropSamples(capturedFrom: endNanos) }
        collector.fillStuckThreadStack()
        collector.closeContext(now: now)
        guard let evidence = collector.evidence else { return }
        collector.reset()
        reports.publishFinal(evidence, status: status, endNanos: endNanos, now: now, waiting: waiting)
    }

    // MARK: Identity

    /// `20261130T221500.123Z-4242-3`: sortable, unique per process.
    static func makeID(wallNanos: UInt64) -> String {
        var t = time_t(wallNanos / 1_000_000_000)
        var tm = tm()
        gmtime_r(&t, &tm)
        let stamp = String(
            format: "%04d%02d%02dT%02d%02d%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
            tm.tm_min, tm.tm_sec, Int(wallNanos / 1_000_000 % 1000))
        return "\(stamp)-\(getpid())-\(counter.next())"
    }
}

/// A process-wide counter for report ids.
final class Counter: @unchecked Sendable {
    // @unchecked Sendable: `value` is read and written only under `lock`.
    private let lock = NSLock()
    private var value = 0
    func next() -> Int {
        lock.lock()
        defer { lock.unlock() }
        value += 1
        return value
    }
}
