// ReportSummary: the one-line digest of a report that `reports list` shows and `reports list --json` emits.
import Foundation
import StallWatch

/// A compact summary of one report, one row of `stallwatch reports list`.
public struct ReportSummary: Codable, Sendable, Equatable {
    public var id: String
    public var path: String
    public var startedAt: Date
    public var durationMs: Double
    public var severity: StallReport.Severity
    public var status: StallReport.Status
    public var phase: String
    public var loop: String
    public var pid: Int32
    public var executable: String
    /// The stall's top frame (`StallReport.applicationFrame`) as `symbol + offset`; nil with no frames.
    public var topFrame: String?
    public var signature: String
    public var samples: Int
    /// What the stall was stuck on (``causeKind(of:)``): `unknown` until the report says.
    public var cause: String

    public init(path: String, report: StallReport) {
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
    }

    /// The kind of the report's cause (`cpu`, `lock`, `io`, …), `unknown` when the report has none.
    ///
    /// The one place that reads `cause.kind`, so `--cause`, `summary --by cause` and the list agree.
    public static func causeKind(of report: StallReport) -> String {
        report.cause?.kind.rawValue ?? "unknown"
    }
}
