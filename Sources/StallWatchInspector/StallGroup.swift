// StallGroup: reports grouped by signature, cause or top frame, with the statistics `reports summary` shows.
import Foundation
import StallWatch

/// A set of reports that are "the same stall", and what they cost together.
package struct StallGroup: Codable, Sendable, Equatable {
    /// What the reports were grouped by.
    package enum Key: String, Codable, Sendable, CaseIterable {
        case signature
        case cause
        case frame
    }

    /// The signature, cause kind or top function shared by the group.
    package var key: String
    /// Stalls: every report's `occurrences` (1 for a report of its own) added up.
    package var count: Int
    /// Sum of the durations of all those stalls, milliseconds (a folded report's `totalDurationMs`; lower
    /// bounds for ongoing and unrecovered reports).
    package var totalMs: Double
    /// Nearest-rank percentiles of the reports' own durations; `maxMs` includes the longest folded stall.
    package var p50Ms: Double
    var p95Ms: Double
    package var maxMs: Double
    var firstSeen: Date
    var lastSeen: Date
    /// The top frame of the group's most recent report (``ReportSummary/topFrame``).
    var topFrame: String?
    /// How many of the reports were hangs, and how many never ended.
    var hangs: Int
    package var unrecovered: Int
    /// How many reports began before watching started: their durations are lower bounds.
    var beganBeforeWatching: Int?
    /// How many reports were withdrawn (``StallReport/Status/withdrawn``): not stalls, so not in the count, the
    /// total or the percentiles.
    var withdrawn: Int?
    /// How many reports were snapshots on demand (``StallReport/Status/snapshot``): not stalls either.
    var snapshots: Int?
    /// The most recent report: `reports show` it to see one instance.
    var latestId: String
    var latestPath: String
    /// What the latest report names as what its loop waited for, when it names one: another thread, a deadlock's
    /// threads, candidate holders (not certain) or another process (``CauseDescription/culprit(_:)``).
    var blockedBy: String?
}

/// Accumulates reports one at a time into ``StallGroup``s; keeps durations, not reports.
package struct StallGrouper: Sendable {
    package let key: StallGroup.Key
    private var partial: [String: Partial] = [:]

    private struct Partial: Sendable {
        var durations: [Double] = []
        var stalls = 0
        var totalMs = 0.0
        var maxMs = 0.0
        var firstSeen: Date
        var lastSeen: Date
        var latest: (id: String, path: String, topFrame: String?)
        var blockedBy: String?
        var hangs = 0
        var unrecovered = 0
        var beganBeforeWatching = 0
        var withdrawn = 0
        var snapshots = 0
    }

    package init(by key: StallGroup.Key) {
        self.key = key
    }

    /// The group a report belongs to under ``key``.
    func groupKey(of report: StallReport) -> String {
        switch key {
        case .signature: report.signature
        case .cause: ReportSummary.causeKind(of: report)
        case .frame: report.applicationFrame?.function ?? "(no stack)"
        }
    }

    package mutating func add(_ report: StallReport, path: String) {
        let name = groupKey(of: report)
        var group =
            partial[name]
            ?? Partial(
                firstSeen: report.startedAt, lastSeen: report.startedAt,
                latest: (report.id, path, report.applicationFrame?.description),
                blockedBy: CauseDescription.culprit(report))
        guard report.status != .withdrawn else {
            group.withdrawn += 1
            partial[name] = group
            return
        }
        guard report.status != .snapshot else {
            group.snapshots += 1
            partial[name] = group
            return
        }
        group.durations.append(report.durationMs)
        let occurrences = max(1, report.occurrences ?? 1)
        group.stalls += occurrences
        // Reports written before totals were kept: the report's own duration stands for each occurrence.
        group.totalMs += report.totalDurationMs ?? report.durationMs * Double(occurrences)
        group.maxMs = max(group.maxMs, report.maxDurationMs ?? report.durationMs, report.durationMs)
        group.firstSeen = min(group.firstSeen, report.startedAt)
        if report.startedAt >= group.lastSeen {
            group.lastSeen = report.startedAt
            group.latest = (report.id, path, report.applicationFrame?.description)
            group.blockedBy = CauseDescription.culprit(report)
        }
        if report.severity == .hang { group.hangs += 1 }
        if report.status == .unrecovered { group.unrecovered += 1 }
        if report.startedBeforeAttach == true { group.beganBeforeWatching += 1 }
        partial[name] = group
    }

    /// The groups, the most total time first (then the most reports, then the key).
    package func groups() -> [StallGroup] {
        partial.map { name, group in
            let sorted = group.durations.sorted()
            var stallGroup = StallGroup(
                key: name, count: group.stalls, totalMs: group.totalMs,
                p50Ms: Self.percentile(sorted, 0.50), p95Ms: Self.percentile(sorted, 0.95), maxMs: group.maxMs,
                firstSeen: group.firstSeen, lastSeen: group.lastSeen, topFrame: group.latest.topFrame,
                hangs: group.hangs, unrecovered: group.unrecovered, latestId: group.latest.id,
                latestPath: group.latest.path)
            if group.beganBeforeWatching > 0 { stallGroup.beganBeforeWatching = group.beganBeforeWatching }
            if group.withdrawn > 0 { stallGroup.withdrawn = group.withdrawn }
            if group.snapshots > 0 { stallGroup.snapshots = group.snapshots }
            stallGroup.blockedBy = group.blockedBy
            return stallGroup
        }.sorted { ($0.totalMs, $0.count, $1.key) > ($1.totalMs, $1.count, $0.key) }
    }

    /// Nearest-rank percentile of ascending `values` (`q` in 0…1); 0 when empty.
    package static func percentile(_ values: [Double], _ q: Double) -> Double {
        guard !values.isEmpty else { return 0 }
        let rank = Int(saturating: (q * Double(values.count)).rounded(.up))
        return values[min(max(rank, 1), values.count) - 1]
    }
}

/// The text and JSON of `reports summary`.
package struct StallGroupView: Sendable {
    package var format: ReportTextFormat
    package var useColor: Bool

    package init(format: ReportTextFormat = ReportTextFormat(), useColor: Bool = false) {
        self.format = format
        self.useColor = useColor
    }

    package func lines(_ groups: [StallGroup], by key: StallGroup.Key) -> [String] {
        // The column of what the loops waited for, only when some group's latest report names it.
        let culprits = groups.contains { $0.blockedBy != nil }
        let header =
            [key.rawValue.uppercased(), "COUNT", "TOTAL", "P50", "P95", "MAX", "FIRST SEEN", "LAST SEEN", "TOP FRAME"]
            + (culprits ? ["BLOCKED BY (LATEST)"] : [])
        let rows = groups.map { group in
            let culprit = culprits ? [ReportListView.shortened(group.blockedBy ?? "-", to: 80)] : []
            return [
                group.key,
                String(group.count) + (group.hangs > 0 ? " (\(group.hangs) hang)" : "")
                    + ((group.withdrawn ?? 0) > 0 ? " (+\(group.withdrawn ?? 0) withdrawn)" : "")
                    + ((group.snapshots ?? 0) > 0 ? " (+\(group.snapshots ?? 0) snapshot)" : ""),
                ReportTextFormat.duration(group.totalMs, beganBefore: (group.beganBeforeWatching ?? 0) > 0),
                ReportTextFormat.duration(group.p50Ms, beganBefore: (group.beganBeforeWatching ?? 0) > 0),
                ReportTextFormat.duration(group.p95Ms, beganBefore: (group.beganBeforeWatching ?? 0) > 0),
                ReportTextFormat.duration(group.maxMs, beganBefore: (group.beganBeforeWatching ?? 0) > 0),
                format.localTime(group.firstSeen), format.localTime(group.lastSeen),
                ReportListView.shortened(group.topFrame ?? "-", to: 100),
            ] + culprit
        }
        let style = TextStyle(useColor: useColor)
        return ReportTextFormat.table([header] + rows) { row, column, cell in
            if row == 0 { return style.styled(cell, "1") }
            if column == 1, groups[row - 1].hangs > 0 { return style.styled(cell, "31") }
            return cell
        }
    }

    /// The document of `reports summary --json`.
    package struct Document: Codable, Sendable, Equatable {
        var by: StallGroup.Key
        /// Reports that passed the filters and were grouped.
        var reports: Int
        /// Files skipped as unreadable or not reports.
        var skipped: Int
        var groups: [StallGroup]

        package init(by: StallGroup.Key, reports: Int, skipped: Int, groups: [StallGroup]) {
            self.by = by
            self.reports = reports
            self.skipped = skipped
            self.groups = groups
        }
    }

    package static func json(_ document: Document) throws -> String {
        String(decoding: try StallReport.makeEncoder().encode(document), as: UTF8.self)
    }
}
