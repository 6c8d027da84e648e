// ReportScanner: reads the reports of the directories and files named on a command line, one at a time.
import Foundation
import StallWatch

/// Streams reports from several directories and files, warning once per file it skips.
///
/// Each report is decoded, handed to the caller and dropped before the next file is read, so memory stays flat
/// however many reports a directory holds; callers keep only what they need (a ``ReportSummary``, a duration).
package struct ReportScanner: Sendable {
    /// Directories (every `*.json` in them) and files, in the order given.
    package var paths: [String]
    package var filter: ReportFilter

    package init(paths: [String], filter: ReportFilter = ReportFilter()) {
        self.paths = paths
        self.filter = filter
    }

    /// What a scan saw besides the reports it handed over.
    package struct Outcome: Sendable, Equatable {
        /// Reports read (before filtering).
        package var read = 0
        /// Reports that passed the filter.
        package var matched = 0
        /// Files skipped as unreadable or not reports (one warning each).
        package var skipped = 0
        /// Named paths that do not exist.
        package var missing: [String] = []

        package init() {}
    }

    /// Calls `body` for every report that passes ``filter``; `warn` gets one line per skipped file (and per
    /// missing path when there are several), without the `stallwatch:` prefix.
    /// - Throws: `StallWatchError` when a named directory cannot be opened.
    /// - Parameter listing: read only what lists and summaries need (``StallReport/listingDecodeKey``): the first
    ///   sample's frames, not every sample's, nor threads, call tree or images.
    package func scan(listing: Bool = false, warn: (String) -> Void, _ body: (ReportStore.Entry) -> Void) throws
        -> Outcome
    {
        var outcome = Outcome()
        for path in paths {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
                outcome.missing.append(path)
                // With one path the caller's "no reports: … does not exist" says it; with several, say which.
                if paths.count > 1 { warn(TerminalText.escape("warning: \(path) does not exist")) }
                continue
            }
            if !isDirectory.boolValue {
                let report: StallReport
                do {
                    report = try ReportStore.load(path: path)
                } catch {
                    outcome.skipped += 1
                    warn(TerminalText.escape("warning: skipping \(error.message)"))
                    continue
                }
                outcome.read += 1
                if filter.matches(report) {
                    outcome.matched += 1
                    body(ReportStore.Entry(path: path, report: report))
                }
                continue
            }
            try ReportStore(directory: path).forEachReport(
                listing: listing,
                onProblem: { problem in
                    outcome.skipped += 1
                    warn(TerminalText.escape("warning: \(problem)"))
                }
            ) { entry in
                outcome.read += 1
                if filter.matches(entry.report) {
                    outcome.matched += 1
                    body(entry)
                }
            }
        }
        return outcome
    }
}

/// Which reports a command looks at: `--since`, `--min-duration-ms`, `--cause`.
package struct ReportFilter: Sendable, Equatable {
    /// Reports that started at or after this instant.
    package var since: Date?
    package var minimumDurationMs: Double?
    /// A ``ReportSummary/causeKind(of:)`` value, compared case-insensitively.
    package var cause: String?

    package init(since: Date? = nil, minimumDurationMs: Double? = nil, cause: String? = nil) {
        self.since = since
        self.minimumDurationMs = minimumDurationMs
        self.cause = cause
    }

    package func matches(_ report: StallReport) -> Bool {
        if let since, report.startedAt < since { return false }
        if let minimumDurationMs, report.durationMs < minimumDurationMs { return false }
        if let cause, ReportSummary.causeKind(of: report).lowercased() != cause.lowercased() { return false }
        return true
    }

    /// `90s`, `30m`, `2h`, `7d`, `1w` before `now`; or an ISO 8601 time; or `YYYY-MM-DD[ HH:MM[:SS]]` (also
    /// with `T`) in `timeZone`.
    package static func since(_ text: String, now: Date, timeZone: TimeZone) -> Date? {
        let units: [Character: Double] = ["s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800]
        if let unit = text.last.flatMap({ units[$0] }), let amount = Double(text.dropLast()), amount >= 0,
            amount.isFinite
        {
            return now.addingTimeInterval(-amount * unit)
        }
        if let date = ReportDate.date(from: text) { return date }
        let parts = text.split(whereSeparator: { $0 == " " || $0 == "T" }).map(String.init)
        guard (1...2).contains(parts.count) else { return nil }
        let day = parts[0].split(separator: "-").compactMap { Int($0) }
        guard day.count == 3, parts[0].count == 10 else { return nil }
        var clock = [0, 0, 0]
        if parts.count == 2 {
            let fields = parts[1].split(separator: ":").compactMap { Int($0) }
            guard (2...3).contains(fields.count), parts[1].split(separator: ":").count == fields.count else {
                return nil
            }
            clock = fields + (fields.count == 2 ? [0] : [])
        }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = timeZone
        let components = DateComponents(
            year: day[0], month: day[1], day: day[2], hour: clock[0], minute: clock[1], second: clock[2])
        guard (1...12).contains(day[1]), (1...31).contains(day[2]), clock[0] < 24, clock[1] < 60, clock[2] < 61
        else { return nil }
        return calendar.date(from: components)
    }
}
