// ReportWorker: the report stage of a StallRecorder: builds, writes and completes reports, in order, on its queue.
import Dispatch
import Synchronization

/// The back half of a ``StallRecorder``: everything that happens to a stall's reports once its evidence is
/// recorded, on one serial queue (``queue``), in the order the watching thread hands the work over.
///
/// The watching thread hands it values — a report built at detection, a stall's evidence — and goes back to the
/// loop at once: a write's fsyncs can take hundreds of ms on a busy disk and a final report's first DWARF load as
/// long, and neither may delay the stall's samples or the watcher's next look. Only when the watching stops does
/// it wait (``publishFinal(_:status:endNanos:now:waiting:)``, ``flush()``, ``waitForLineFills()``).
///
/// It owns what it uses on its queue: the ``StallPublisher`` (report files and the fold of repeats), the
/// symbolicators of final reports and of provisional rewrites (a ``Symbolicator`` is not thread-safe), and the one
/// provisional rewrite in flight; and it hands final reports written without some lines to its ``LineFiller``,
/// the last stage, on a queue of its own. The one thing it answers the watching thread is the sampling scale of
/// a signature reported recently (annealing), from the deduplicator's history, which has a lock of its own.
final class ReportWorker: @unchecked Sendable {
    // @unchecked Sendable: `publisher`, `symbolicator` and `rewriteSymbolicator` are used on `queue` alone;
    // `rewriteInFlight` is atomic, `history` and `lineFiller` are thread-safe, the rest is immutable.
    /// Where reports are built, written and emitted, one job at a time.
    let queue = DispatchQueue(label: "stallwatch.reports")
    private var publisher: StallPublisher
    private let history: SharedDeduplicator
    private let builder: StallReportBuilder
    /// The configured mode, for final reports; in `full` mode it does not wait for line tables to load (the
    /// ``LineFiller`` fills in what it could not give).
    private let symbolicator: Symbolicator
    /// Names only, for the rewrites of a provisional report while its stall lasts.
    private let rewriteSymbolicator: Symbolicator
    /// A provisional rewrite is queued or under way; the next one waits for it to finish.
    private let rewriteInFlight = Atomic<Bool>(false)
    /// Loads line tables while a stall goes on, and fills in the lines a final report was written without.
    private let lineFiller: LineFiller
    private let maxThreadFrames: Int
    private let emit: @Sendable (StallEvent) -> Void

    /// - Parameters:
    ///   - builder: Builds the reports (on `queue`).
    ///   - emit: Receives `ended` and `reportFailed`; never called twice at once by the caller's arrangement.
    init(
        configuration: StallWatchConfiguration, builder: StallReportBuilder, processID: Int32,
        emit: @escaping @Sendable (StallEvent) -> Void
    ) {
        self.builder = builder
        self.emit = emit
        maxThreadFrames = configuration.maxThreadFrames
        symbolicator = Symbolicator(processID: processID, mode: configuration.symbolication)
        symbolicator.waitsForLines = false
        rewriteSymbolicator = Symbolicator(processID: processID, mode: .fast)
        lineFiller = LineFiller(processID: processID)
        publisher = StallPublisher(configuration: configuration, emit: emit, lineFiller: lineFiller)
        history = publisher.history
    }

    /// The sampling interval multiplier for a stall whose first sample has `signature` (annealing). Any thread.
    func samplingScale(signature: String, now: UInt64) -> UInt64 {
        history.samplingScale(signature: signature, now: now)
    }

    /// Writes the provisional report built at detection, or on escalation to a hang.
    func publishProvisional(_ report: StallReport) {
        queue.async { [self] in publisher.publishProvisional(report) }
    }

    /// Builds the provisional report of a stall in progress with every sample of `evidence` and writes it over
    /// the last one; skipped while the previous rewrite is still queued (a final report waits for that one, so it
    /// always lands last).
    func rewriteProvisional(_ evidence: StallEvidence) {
        guard !rewriteInFlight.exchange(true, ordering: .acquiringAndReleasing) else { return }
        queue.async { [self] in
            // Built here too, not on the watching thread: symbolicating and building take long enough under load
            // to leave gaps in the stall's sampling.
            let report = builder.build(
                evidence, status: .ongoing, endNanos: nil, final: true, now: nil, symbols: rewriteSymbolicator)
            publisher.publishProvisional(report)
            rewriteInFlight.store(false, ordering: .releasing)
        }
    }

    /// Builds the final report of `evidence`, publishes it (a file of its own or a fold into a recent report),
    /// has its missing lines filled in, and emits `ended`: after every job queued before it, so it lands after
    /// the stall's provisional reports. With `waiting`, returns once it is done.
    func publishFinal(
        _ evidence: StallEvidence, status: StallReport.Status, endNanos: UInt64?, now: UInt64, waiting: Bool = false
    ) {
        let job = { @Sendable [self] in
            let report = builder.build(
                evidence, status: status, endNanos: endNanos, final: true, now: now, symbols: symbolicator)
            let published = publisher.publishFinal(report, now: now)
            if let pending = publisher.writtenWithLinesPending {
                lineFiller.fill(
                    pending, evidence: evidence, maxThreadFrames: maxThreadFrames, writer: publisher.writer, emit: emit)
            }
            emit(.ended(published))
        }
        if waiting { queue.sync(execute: job) } else { queue.async(execute: job) }
    }

    /// Publishes a final report built elsewhere (a stall nobody sampled) and emits `ended`, in queue order.
    func publishFinal(_ report: StallReport, now: UInt64) {
        queue.async { [self] in emit(.ended(publisher.publishFinal(report, now: now))) }
    }

    /// Builds a snapshot report with the final reports' symbolicator and writes it (no stall: never folded, no
    /// event); on `queue` only.
    func writeSnapshotOnQueue(_ build: (any FrameResolving) -> StallReport) -> Result<String, StallWatchError> {
        dispatchPrecondition(condition: .onQueue(queue))
        do {
            return .success(try publisher.writer.write(build(symbolicator)))
        } catch {
            return .failure(error)
        }
    }

    /// Gives the report's symbolicator what the recorder's own read of the target's images while it surely ran
    /// (``Symbolicator/imageSnapshot(for:)``): the queue may get to this stall only after the target exited.
    func adoptImages(_ snapshot: Symbolicator.ImageSnapshot) {
        queue.async { [self] in symbolicator.adopt(snapshot) }
    }

    /// Reads the image map of another process for these addresses now, while it lives, so the final report keeps
    /// its symbols if the process exits during the stall.
    func prepareSymbols(for addresses: [UInt64]) {
        queue.async { [self] in symbolicator.prepare(addresses: addresses) }
    }

    /// Loads the shared symbol table of the image holding `address` (names only), in queue order.
    func warmUp(address: UInt64) {
        queue.async { [self] in _ = rewriteSymbolicator.symbolicate([address]) }
    }

    /// Loads the line tables of `stacks`' images in the background while the stall goes on (``LineFiller``).
    func prefetchLines(_ stacks: [[UnwoundFrame]]) { lineFiller.prefetch(stacks) }

    /// Waits until every job queued so far is done (final reports written, their `ended` emitted).
    func flush() { queue.sync {} }

    /// Waits until the lines of every final report written so far are filled in (and their files rewritten).
    func waitForLineFills() { lineFiller.waitForFills() }
}
