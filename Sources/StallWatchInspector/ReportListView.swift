// ReportListView: renders `stallwatch reports list` as an aligned table or as a JSON array of summaries.
import Foundation
import StallWatch

/// The table of `reports list`: one row per report, newest first.
package struct ReportListView: Sendable {
    package var format: ReportTextFormat
    package var useColor: Bool

    package init(format: ReportTextFormat = ReportTextFormat(), useColor: Bool = false) {
        self.format = format
        self.useColor = useColor
    }

    /// The orders `reports list --sort` offers.
    package enum Order: String, Sendable, CaseIterable {
        /// Newest `startedAt` first.
        case time
        /// Longest first.
        case duration
    }

    /// Summaries sorted newest first (by `startedAt`, then id), or longest first (then newest first).
    package static func sorted(_ summaries: [ReportSummary], by order: Order = .time) -> [ReportSummary] {
        switch order {
        case .time: summaries.sorted { ($0.startedAt, $0.id) > ($1.startedAt, $1.id) }
        case .duration: summaries.sorted { ($0.durationMs, $0.startedAt, $0.id) > ($1.durationMs, $1.startedAt, $1.id) }
        }
    }

    /// The table's lines, header first; `summaries` must already be in display order.
    package func lines(_ summaries: [ReportSummary]) -> [String] {
        let header = ["TIME", "DURATION", "SEVERITY", "STATUS", "CAUSE", "PHASE", "ID", "TOP FRAME"]
        let rows = summaries.map { summary in
            [
                format.localTime(summary.startedAt),
                ReportTextFormat.duration(
                    summary.durationMs, status: summary.status, beganBefore: summary.startedBeforeAttach == true),
                summary.severity.rawValue, summary.status.rawValue, summary.cause, summary.phase, summary.id,
                Self.shortened(summary.topFrame ?? "-", to: 100),
            ]
        }
        let style = TextStyle(useColor: useColor)
        return ReportTextFormat.table([header] + rows) { row, column, cell in
            if row == 0 { return style.styled(cell, "1") }
            if column == 2, summaries[row - 1].severity == .hang { return style.styled(cell, "31") }
            if column == 3, summaries[row - 1].status != .ended { return style.styled(cell, "33") }
            return cell
        }
    }

    /// The JSON of `reports list --json`: an array of summaries, in the report encoder's format.
    package static func json(_ summaries: [ReportSummary]) throws -> String {
        String(decoding: try StallReport.makeEncoder().encode(summaries), as: UTF8.self)
    }

    static func shortened(_ text: String, to limit: Int) -> String {
        // A text of at most `limit` bytes has at most `limit` characters: no need to count them.
        text.utf8.count <= limit || text.count <= limit ? text : String(text.prefix(limit - 1)) + "…"
    }
}
