// StallRecorder: follows one detected stall through its stages: collecting evidence, building, publishing.
import CStallWatchCore
import Foundation
import Synchronization

/// Follows one stall at a time on the watching thread, in three stages: the ``EvidenceCollector`` samples the
/// stuck thread at detection and then every `sampleIntervalMs` (at most `maxSamples`; less often for a
/// signature seen before), the ``StallReportBuilder`` turns the evidence into a report, and the
/// ``StallPublisher`` writes the provisional report at detection and the final one at the end (or folds it into
/// a recent report with the same signature).
///
/// The first provisional report is built on the watching thread and written on a serial queue (``writes``);
/// provisional rewrites and the final report are built there too: a write's fsyncs can take hundreds of ms on a
/// busy disk, and a final report's first DWARF load as long, and neither may delay the stall's samples or the
/// watcher's next look. The final report runs after every write queued before it, so it always lands last and
/// is never overwritten by a provisional one.
package final class StallRecorder: @unchecked Sendable {  // Used by one watching thread only, after hand-off.
    let configuration: StallWatchConfiguration
    /// What is watched and how it is sampled (this process by signal, or another one by ptrace).
    let target: Target
    /// The configured mode, for final reports (used only on `writes`); in `full` mode it does not wait for line
    /// tables to load (the ``LineFiller`` fills in what it could not give).
    let symbolicator: Symbolicator
    /// Names only (no DWARF line tables, whose first load can take tens of ms), for the provisional report
    /// that must be on disk within a few ms of detection.
    let quickSymbolicator: Symbolicator
    /// The listener's handler, called one event at a time (final reports are emitted from `writes`).
    private let serialEmit: @Sendable (StallEvent) -> Void
    private var collector: EvidenceCollector
    private let builder: StallReportBuilder
    /// Used on the watching thread (annealing, provisional reports) and on `writes` (final reports).
    private let publisher: Mutex<StallPublisher>
    /// When the next sample of the followed stall is due (CLOCK_MONOTONIC), nil when none is.
    package var nextSampleAt: UInt64? { collector.nextSampleAt }
    private static let counter = Counter()
    /// When the provisional report was last written (CLOCK_MONOTONIC).
    private var lastProvisionalAt: UInt64 = 0
    /// Where the first and provisional reports are written and final reports built and written, one job at a time,
    /// in order: off the watching thread, which must keep looking at the loop meanwhile (a write's fsyncs can take
    /// hundreds of ms on a busy disk; a final report's first DWARF load took 700–900 ms on a loaded machine, long
    /// enough to miss the next stall whole).
    let writes = DispatchQueue(label: "stallwatch.reports")
    /// Names for the rewrites, used only on `writes` (a Symbolicator is not thread-safe).
    private let rewriteSymbolicator: Symbolicator
    private let rewritePending = SharedFlag()
    /// Loads line tables while a stall goes on, and fills in the lines a final report was written without.
    private let lineFiller: LineFiller

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
        symbolicator = Symbolicator(processID: target.processID, mode: configuration.symbolication)
        symbolicator.waitsForLines = false
        if let shared, shared.mode == .fast, configuration.symbolication != .off {
            quickSymbolicator = shared
        } else {
            quickSymbolicator =
                configuration.symbolication == .full
                ? Symbolicator(processID: target.processID, mode: .fast) : symbolicator
        }
        rewriteSymbolicator = Symbolicator(processID: target.processID, mode: .fast)
        lineFiller = LineFiller(processID: target.processID)
        collector = EvidenceCollector(configuration: configuration, target: target)
        builder = StallReportBuilder(
            configuration: configuration, detector: detector, loopName: loopName,
            detectionSource: target.detectionSource,
            process: target.process, phaseKnown: target.phaseKnown,
            captureMethod: target.sampler?.captureMethod ?? .none, clock: { sw_monotonic_ns() })
        publisher = Mutex(StallPublisher(configuration: configuration, emit: serialEmit, lineFiller: lineFiller))
    }

    /// Passes `event` to the listener, never two at once.
    func emit(_ event: StallEvent) { serialEmit(event) }

    var isFollowing: Bool { collector.evidence != nil }
    /// Samples of the stuck thread taken so far in the stall being followed (0 when none is).
    package var samplesTaken: Int { collector.evidence?.samples.count ?? 0 }
    /// The `task` and `pool` sections the next stall's report carries (set by the pool watchdog before it begins).
    var nextTask: StallReport.TaskDescription?
    var nextPool: StallReport.PoolDescription?

    /// Pays the symbolicator's set-up (mappings, libdwfl session, symbol tables of the images) when the watchdog
    /// starts, on its thread, rather than at the first stall, where it would delay the provisional report and
    /// the first samples.
    func warmUp() {
        let here = UInt64(
            UInt(bitPattern: unsafeBitCast(sw_monotonic_ns as @convention(c) () -> UInt64, to: UnsafeRawPointer.self)))
        _ = quickSymbolicator.symbolicate([here])
    }

    // MARK: Lifecycle of one stall

    /// A stall began on `thread` of the target (detected at `now`, CLOCK_MONOTONIC): first sample, all
    /// threads' state, provisional report.
    func begin(
        _ stall: StallDetector.Stall, thread: SampledThread?, annotations: [String: String],
        schedule: ThreadSchedule? = nil, now: UInt64, isOngoing: () -> Bool = { true }
    ) {
        let reportID = Self.makeID(wallNanos: sw_realtime_ns())
        collector.begin(
            stall, thread: thread, annotations: annotations, schedule: schedule, reportID: reportID, now: now,
            isOngoing: isOngoing)
        collector.attach(task: nextTask, pool: nextPool)
        guard let evidence = collector.evidence else { return }
        // Annealing: a stall that looks like one reported recently is sampled less often.
        let first = evidence.samples.first?.frames ?? []
        let firstSignature = StallSignature.compute(stack: quickSymbolicator.symbolicate(first))
        let scale = publisher.withLock { $0.samplingScale(signature: firstSignature, now: now) }
        collector.slowDown(by: scale, now: now)
        if let report = provisional() { emit(.began(report)) }
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
        // Another process may exit mid-stall: read its image map now, so the final report keeps its symbols.
        if target.processID != getpid() {
            let symbolicator = symbolicator
            writes.async { symbolicator.prepare(addresses: first.map(\.address)) }
        }
        if configuration.symbolication == .full {
            prefetchLines([first] + evidence.threads.map { Array($0.frames.prefix(configuration.maxThreadFrames)) })
        }
    }

    /// Loads the line tables of the first sample's and the other threads' frames into the shared symbol cache in
    /// the background while the stall goes on, so the final report has the lines at once when the tables are
    /// ready by the stall's end (the first DWARF load of an image takes tens to hundreds of ms). The final report
    /// never waits for it: what is not loaded by then is filled in afterwards (``LineFiller``).
    private func prefetchLines(_ stacks: [[UnwoundFrame]]) {
        lineFiller.prefetch(stacks)
    }

    /// Waits until the lines of every final report written so far are filled in (and their files rewritten).
    /// Called when the watching stops, so a service that exits after stopping leaves complete reports.
    package func waitForLineFills() { lineFiller.waitForFills() }

    /// The wait the stuck thread was in just before its latest capture, as the sample's probe read it.
    var lastSampleWait: ThreadWait? { collector.evidence?.samples.last?.probe?.wait }

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

    /// Builds the report with every sample so far here, and writes it on `writes`: the write's fsyncs can take
    /// hundreds of ms on a busy disk and must not delay the next samples. One rewrite at a time; a final report
    /// waits for a pending one (``finish(status:endNanos:now:)``), so it always lands last.
    private func rewriteProvisional(now: UInt64) {
        lastProvisionalAt = now
        guard let evidence = collector.evidence, !rewritePending.isSet else { return }
        let job = ReportJob(builder: builder, evidence: evidence, symbols: rewriteSymbolicator)
        let writer = publisher.withLock { $0.writer }, pending = rewritePending
        pending.set(true)
        writes.async {
            // Built here too, not on the watching thread: symbolicating and building take long enough under
            // load to leave gaps in the stall's sampling.
            let report = job.build()
            do throws(StallWatchError) {
                try writer.write(report)
            } catch {
                self.emit(.reportFailed(error))
            }
            pending.set(false)
        }
    }

    func escalate(_ stall: StallDetector.Stall) {
        collector.escalate(stall)
        if let report = provisional() { emit(.escalated(report)) }
    }

    /// The stall ended: its final report is built, written and emitted on `writes`, so the watching thread
    /// goes back to the loop at once and sees a stall that starts meanwhile.
    package func end(endNanos: UInt64) {
        guard let job = finish(status: .ended, endNanos: endNanos, now: endNanos) else { return }
        writes.async(execute: job)
    }

    /// The watching is stopping while the loop is still stuck (`reason` replaces the default note). Returns once
    /// every report of this recorder is written, this one included.
    package func abandon(now: UInt64, reason: String? = nil) {
        guard collector.evidence != nil else { return flush() }
        collector.addNote(reason ?? "the watchdog stopped while the loop was still stuck")
        guard let job = finish(status: .unrecovered, endNanos: nil, now: now) else { return flush() }
        writes.sync(execute: job)
    }

    /// Waits until the final reports of ended stalls are written (and their `ended` events emitted).
    package func flush() { writes.sync {} }

    func addNote(_ note: String) { collector.addNote(note) }

    /// A stall nobody followed: its thread timed it itself (a pool job that crossed the threshold and returned
    /// before the watchdog looked at its worker). One final report, with the exact duration and no samples; the
    /// stall being followed, if any, is left as it is. Returns the report as published.
    @discardableResult
    func recordUnsampled(
        _ stall: StallDetector.Stall, threadID: Int32, endNanos: UInt64, task: StallReport.TaskDescription?,
        cause: StallReport.Cause, notes: [String]
    ) -> StallReport {
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
        let published = publisher.withLock { $0.publishFinal(report, now: now) }
        emit(.ended(published))
        return published
    }

    /// The watcher woke `delayNanos` later than it asked during the stall: evidence of a starved machine.
    func noteLateWakeup(_ delayNanos: UInt64) { collector.noteLateWakeup(delayNanos) }

    // MARK: Reports

    /// Builds the provisional report (at detection, or on escalation to a hang: the first sample only, to be
    /// quick) and queues its write on `writes`.
    private func provisional() -> StallReport? {
        guard let evidence = collector.evidence else { return nil }
        let report = builder.build(
            evidence, status: .ongoing, endNanos: nil, final: false, now: nil, symbols: quickSymbolicator)
        writes.async { [self] in publisher.withLock { $0.publishProvisional(report) } }
        return report
    }

    /// Closes the stall's evidence and returns the job that builds, publishes and emits its final report, to run
    /// on `writes` (after any rewrite of its provisional report, so the final one lands last).
    private func finish(status: StallReport.Status, endNanos: UInt64?, now: UInt64) -> (@Sendable () -> Void)? {
        collector.closeContext(now: now)
        guard let evidence = collector.evidence else { return nil }
        collector.reset()
        let job = ReportJob(builder: builder, evidence: evidence, symbols: symbolicator)
        let lineFiller = lineFiller, maxThreadFrames = configuration.maxThreadFrames
        return { [self] in
            let report = job.build(status: status, endNanos: endNanos, now: now)
            let (published, pending, writer) = publisher.withLock {
                ($0.publishFinal(report, now: now), $0.writtenWithLinesPending, $0.writer)
            }
            if let pending {
                lineFiller.fill(
                    pending, evidence: evidence, maxThreadFrames: maxThreadFrames, writer: writer, emit: serialEmit)
            }
            emit(.ended(published))
        }
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

/// A flag shared with the rewrite queue.
final class SharedFlag: Sendable {
    private let value = Atomic<Bool>(false)
    var isSet: Bool { value.load(ordering: .acquiring) }
    func set(_ new: Bool) { value.store(new, ordering: .releasing) }
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

/// One report built on the report queue: a rewrite of a provisional report (`ongoing`), or a final one.
private struct ReportJob: @unchecked Sendable {
    // @unchecked Sendable: the builder's clock only reads CLOCK_MONOTONIC, the evidence is a value, and each
    // symbolicator given here is used on the report queue alone, one job at a time.
    let builder: StallReportBuilder
    let evidence: StallEvidence
    let symbols: Symbolicator

    func build(status: StallReport.Status = .ongoing, endNanos: UInt64? = nil, now: UInt64? = nil) -> StallReport {
        builder.build(evidence, status: status, endNanos: endNanos, final: true, now: now, symbols: symbols)
    }
}
