// ReportSummary: the one-line digest of a report that `reports list` shows and `reports list --json` emits.
import Foundation
import StallWatch

/// A compact summary of one report, one row of `stallwatch reports list`.
package struct ReportSummary: Codable, Sendable, Equatable {
    package var id: String
    package var path: String
    package var startedAt: Date
    package var durationMs: Double
    package var severity: StallReport.Severity
    package var status: StallReport.Status
    package var phase: String
    package var loop: String
    package var pid: Int32
    package var executable: String
    /// The stall's top frame (`StallReport.applicationFrame`) as `symbol + offset`; nil with no frames.
    var topFrame: String?
    package var signature: String
    package var samples: Int
    /// What the stall was stuck on (``causeKind(of:)``): `unknown` until the report says.
    package var cause: String
    /// True when the stall began before watching started (``StallReport/startedBeforeAttach``): its start and
    /// duration are bounds.
    package var startedBeforeAttach: Bool?

    package init(path: String, report: StallReport) {
        id = report.id
        self.path = path
        startedAt = report.startedAt
        durationMs = report.durationMs
        severity = report.severity
        status = report.status
        phase = report.loop.phase
        loop = report.loop.name
        pid = report.process.pid
        executable = report.process.executable
        topFrame = report.applicationFrame?.description
        signature = report.signature
        samples = report.samples.count
        cause = Self.causeKind(of: report)
        startedBeforeAttach = report.startedBeforeAttach
    }

    /// The kind of the report's cause (`cpu`, `lock`, `io`, …), `unknown` when the report has none.
    ///
    /// The one place that reads `cause.kind`, so `--cause`, `summary --by cause` and the list agree.
    static func causeKind(of report: StallReport) -> String {
        report.cause?.kind.rawValue ?? "unknown"
    }
}
