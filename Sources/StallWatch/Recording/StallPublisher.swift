// StallPublisher: writes reports, and folds a repeat of a recent stall into the report kept in memory.
#if canImport(Glibc)
    import Glibc
#endif

/// Publishes the reports of one watched loop: provisional reports as they come, and for each final report the
/// deduplicator's decision — a file of its own, a fold into the recent report with the same signature, or (over
/// the hourly cap) only a count.
///
/// A fold rewrites the last report written for the signature, kept here in memory (no file is read back); the
/// reports kept are those still inside the dedup window, so memory follows the number of distinct recent stalls.
struct StallPublisher {
    let writer: ReportWriter
    private let emit: @Sendable (StallEvent) -> Void
    /// Which signatures were reported recently; shared with the watching thread, which anneals by it.
    let history: SharedDeduplicator
    /// The last report written per signature, with the time (CLOCK_MONOTONIC) of its last occurrence.
    private var recent: [String: (report: StallReport, lastSeenNanos: UInt64)] = [:]
    /// Fills in the lines of final reports written without some; the source of the filled copies in `recent`.
    private let lineFiller: LineFiller?
    /// The final report the last ``publishFinal(_:now:)`` wrote with its lines pending, for the recorder to have
    /// filled in; nil when it wrote none.
    private(set) var writtenWithLinesPending: StallReport?

    /// - Parameter lineFiller: Where final reports written with lines pending are filled in; a fold into such a
    ///   report waits for its fill, so the lines are never lost.
    init(
        configuration: StallWatchConfiguration, emit: @escaping @Sendable (StallEvent) -> Void,
        lineFiller: LineFiller? = nil
    ) {
        self.lineFiller = lineFiller
        writer = ReportWriter(configuration: configuration)
        writer.removeLeftovers()
        history = SharedDeduplicator(
            StallDeduplicator(
                windowNanos: configuration.intervals.dedupWindow, maxPerHour: configuration.maxReportsPerHour))
        self.emit = emit
    }

    /// Writes a provisional report (at detection, or on escalation to a hang).
    mutating func publishProvisional(_ report: StallReport) {
        persist(report)
    }

    /// Publishes the final report of a stall that ended at `now`; returns it as listeners should see it (with
    /// the occurrence count when it was folded).
    mutating func publishFinal(_ report: StallReport, now: UInt64) -> StallReport {
        var report = report
        writtenWithLinesPending = nil
        absorbFilledReports()
        // Not a stall: its own file, never folded, and no stall of its signature for the deduplicator.
        if report.status == .withdrawn {
            persist(report, final: true)
            return report
        }
        let window = history.windowNanos
        recent = recent.filter { now &- $0.value.lastSeenNanos <= window }
        let anotherCulprit = recent[report.signature].map {
            StallDeduplicator.anotherCulprit(in: report, besides: $0.report)
        }
        switch history.decide(
            signature: report.signature, reportID: report.id, now: now, severity: report.severity,
            durationMs: report.durationMs, cause: report.cause?.kind.rawValue, anotherCulprit: anotherCulprit ?? false)
        {
        case .writeNew:
            let suppressed = history.takeSuppressed()
            if suppressed > 0 {
                report.notes.append("\(suppressed) earlier stall(s) were not written: over maxReportsPerHour")
            }
            persist(report, final: true)
            if report.signature != "unknown" { recent[report.signature] = (report, now) }
        case .fold(let existingID, let occurrences):
            writer.removeFile(ofReportID: report.id)
            fold(report, into: existingID, occurrences: occurrences, now: now)
            report.occurrences = occurrences
        case .suppress:
            writer.removeFile(ofReportID: report.id)
        }
        return report
    }

    /// Bumps `occurrences`/`lastSeen` of the recent report and rewrites it (atomically); if its file is gone
    /// (pruned, deleted), this stall's report is written instead.
    private mutating func fold(_ report: StallReport, into id: String, occurrences: Int, now: UInt64) {
        if let lineFiller, lineFiller.isOutstanding(id) {
            // Its lines are being filled in: fold into the filled copy, and write after the fill does.
            lineFiller.waitForFills()
            absorbFilledReports()
        }
        guard var existing = recent[report.signature]?.report, existing.id == id, writer.hasFile(ofReportID: id) else {
            persist(report, final: true)
            return
        }
        existing.occurrences = occurrences
        existing.maxDurationMs = max(existing.maxDurationMs ?? existing.durationMs, report.durationMs)
        existing.totalDurationMs = (existing.totalDurationMs ?? existing.durationMs) + report.durationMs
        existing.firstSeen = existing.firstSeen ?? existing.startedAt
        existing.lastSeen = report.startedAt
        persist(existing)
        recent[report.signature] = (existing, now)
    }

    /// Takes the reports whose lines have been filled in into `recent`, where they are still the latest.
    private mutating func absorbFilledReports() {
        guard let lineFiller else { return }
        for filled in lineFiller.takeCompleted() where recent[filled.signature]?.report.id == filled.id {
            recent[filled.signature]?.report = filled
        }
    }

    private mutating func persist(_ report: StallReport, final: Bool = false) {
        do {
            try writer.write(report)
            if final, report.linesPending { writtenWithLinesPending = report }
        } catch {
            emit(.reportFailed(error))
        }
    }
}
