// The `stallwatch reports summary` subcommand: which stalls cost the most, grouped.
import Foundation
import StallWatch
import StallWatchInspector

extension ReportsCommands {
    /// `reports summary [DIR|FILE…] [--by signature|cause|frame] [filters] [--json]`: groups, the most total
    /// stall time first; skipped files are warned about on standard error, one line each.
    package static func summary(_ invocation: Invocation) throws -> ExitCode {
        let console = invocation.console
        let key = try option(invocation.arguments, "--by", default: StallGroup.Key.signature)
        let scanner = try scanner(invocation)
        var grouper = StallGrouper(by: key)
        let outcome = try scanner.scan(listing: true, warn: { console.printError("stallwatch: \($0)") }) { entry in
            grouper.add(entry.report, path: entry.path)
        }
        let groups = grouper.groups()
        if invocation.arguments.has("--json") {
            console.print(
                try StallGroupView.json(
                    .init(by: key, reports: outcome.matched, skipped: outcome.skipped, groups: groups)))
        } else if !groups.isEmpty {
            let view = StallGroupView(format: textFormat(invocation.environment), useColor: console.useColor)
            view.lines(groups, by: key).forEach { console.print($0) }
            let total = groups.map(\.totalMs).reduce(0, +)
            let stalls = groups.map(\.count).reduce(0, +)
            var footer =
                "\(outcome.matched) report\(outcome.matched == 1 ? "" : "s")"
                + (stalls != outcome.matched ? " (\(stalls) stalls)" : "") + " in \(groups.count) group"
                + "\(groups.count == 1 ? "" : "s"), \(ReportTextFormat.duration(total)) stalled in all"
            if outcome.skipped > 0 { footer += "; \(outcome.skipped) file\(outcome.skipped == 1 ? "" : "s") skipped" }
            console.print()
            console.print(footer)
        }
        if groups.isEmpty {
            console.printError("stallwatch: \(nothingFound(scanner, outcome))")
            return .notFound
        }
        return .ok
    }
}
