// Snapshots on demand: a report of the loop's lead-up written without a stall, from the API or a request from outside.
import CStallWatchCore
import Foundation

extension StallRecorder {
    /// What a snapshot shows of the loop at the moment it is taken.
    struct SnapshotMoment: Sendable {
        var reason: String
        /// The loop's lead-up up to `now`; nil when the loop records none.
        var leadUp: LeadUpCapture?
        var threadID: Int32
        var loop: LoopSnapshot
        var annotations: [String: String]
        /// CLOCK_MONOTONIC and the wall clock (ns since 1970) when it was taken.
        var now: UInt64
        var wallNanos: UInt64
    }

    /// Builds the snapshot report of `moment` and writes it on the report queue, after the reports queued before
    /// it; never folded into another report and no event for it (it is no stall).
    ///
    /// - Returns: The report's path, once written.
    /// - Throws: `.report` or `.systemCall` when it cannot be written.
    func writeSnapshot(_ moment: SnapshotMoment) throws(StallWatchError) -> String {
        let id = Self.makeID(wallNanos: moment.wallNanos)
        return try reports.queue.sync { [self] in
            reports.writeSnapshotOnQueue { builder.snapshot(moment, id: id, symbols: $0) }
        }.get()
    }

    /// ``writeSnapshot(_:)`` without waiting: `then` gets the path or the error on the report queue.
    func writeSnapshot(_ moment: SnapshotMoment, then: @escaping @Sendable (Result<String, StallWatchError>) -> Void) {
        let id = Self.makeID(wallNanos: moment.wallNanos)
        reports.queue.async { [self] in
            then(reports.writeSnapshotOnQueue { builder.snapshot(moment, id: id, symbols: $0) })
        }
    }
}

extension StallReportBuilder {
    /// The report of a snapshot: status `snapshot` with its reason, the loop as it is, the lead-up up to now; no
    /// samples, no cause, a duration of 0.
    func snapshot(_ moment: StallRecorder.SnapshotMoment, id: String, symbols: any FrameResolving) -> StallReport {
        let wallDate = { (mono: UInt64) in
            Date(timeIntervalSince1970: (Double(moment.wallNanos) - (Double(moment.now) - Double(mono))) / 1e9)
        }
        let at = wallDate(moment.now)
        var report = StallReport(
            id: id, status: .snapshot, severity: .stall, startedAt: at, endedAt: at, durationMs: 0,
            detection: .init(
                source: detectionSource, strategy: configuration.strategy,
                thresholdMs: StallReport.milliseconds(detector.thresholdNanos),
                hangThresholdMs: StallReport.milliseconds(detector.hangThresholdNanos), detectedAt: at, latencyMs: 0),
            process: process,
            loop: .init(
                name: loopName, threadId: moment.threadID,
                phase: phaseKnown ? moment.loop.activity.description : "unknown", iteration: moment.loop.sequence),
            samples: [], images: [], signature: StallSignature.compute(stack: nil),
            capture: .init(method: captureMethod, sampleIntervalMs: 0), annotations: moment.annotations)
        report.snapshotReason = PrintableText.filtered(moment.reason)
        report.occurrences = 1
        if let capture = moment.leadUp {
            var builder = LeadUpSectionBuilder(
                stallStartNanos: nil, thresholdNanos: detector.thresholdNanos, wallDate: wallDate)
            builder.forStall = false
            builder.symbolicate = { symbols.symbolicate($0) }
            report.leadUp = builder.build(capture)
        }
        return report
    }
}
