// ReportFilter's command-line form: the `--since`, `--min-duration-ms` and `--cause` options.
import Foundation
import StallWatchInspector

extension ReportFilter {
    /// The filter of a command line's `--since`, `--min-duration-ms` and `--cause` options.
    /// - Parameters:
    ///   - now: what `--since 2h` counts back from.
    ///   - timeZone: the zone of `--since` times written without one.
    /// - Throws: ``CommandError`` (usage) for a value that does not parse.
    package static func parse(_ arguments: Arguments, now: Date, timeZone: TimeZone) throws(CommandError)
        -> ReportFilter
    {
        var filter = ReportFilter()
        if let text = arguments.options["--since"] {
            guard let date = since(text, now: now, timeZone: timeZone) else {
                throw .usage(
                    "--since \(text): expected a duration (90s, 30m, 2h, 7d, 1w) or a time (2026-11-30, "
                        + "2026-11-30 22:15, 2026-11-30T22:15:00Z)")
            }
            filter.since = date
        }
        if let text = arguments.options["--min-duration-ms"] {
            guard let value = Double(text), value.isFinite, value >= 0 else {
                throw .usage("--min-duration-ms \(text): expected a number of milliseconds")
            }
            filter.minimumDurationMs = value
        }
        if let text = arguments.options["--cause"] {
            guard !text.isEmpty else { throw .usage("--cause needs a kind") }
            filter.cause = text
        }
        return filter
    }
}
