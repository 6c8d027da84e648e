// ReportsCommands: the `stallwatch reports list` and `stallwatch reports show` subcommands.
import Foundation
import StallWatch

/// The functions behind the `reports` subcommands (see ``StallWatchCLI/subcommands``).
public enum ReportsCommands {
    /// `reports list [DIR] [--json]`: newest first; skipped files are warned about on standard error.
    public static func list(_ invocation: Invocation) throws -> ExitCode {
        let console = invocation.console
        let named = invocation.arguments.positionals.first
        let directory = named ?? defaultDirectory(invocation.environment)
        var summaries: [ReportSummary] = []
        do {
            try ReportStore(directory: directory).forEachReport(onProblem: { problem in
                console.printError("stallwatch: warning: \(problem)")
            }) { entry in
                summaries.append(ReportSummary(path: entry.path, report: entry.report))
            }
        } catch {
            if error.errno == ENOENT { throw CommandError.notFound("no reports: \(directory) does not exist") }
            throw error
        }
        summaries = ReportListView.sorted(summaries)
        if invocation.arguments.has("--json") {
            console.print(try ReportListView.json(summaries))
        } else if !summaries.isEmpty {
            let view = ReportListView(format: textFormat(invocation.environment), useColor: console.useColor)
            view.lines(summaries).forEach { console.print($0) }
        }
        if summaries.isEmpty {
            console.printError("stallwatch: no reports in \(directory)")
            return .notFound
        }
        return .ok
    }

    /// `reports show FILE|ID [--dir DIR] [--json]`: a path (anything with a `/`, ending in `.json`, or naming
    /// an existing file) is read directly; anything else is a report id or unique id prefix in DIR.
    public static func show(_ invocation: Invocation) throws -> ExitCode {
        let console = invocation.console
        let target = invocation.arguments.positionals[0]
        let entry: ReportStore.Entry
        if target.contains("/") || target.hasSuffix(".json") || FileManager.default.fileExists(atPath: target) {
            entry = ReportStore.Entry(path: target, report: try load(target))
        } else {
            let directory = invocation.arguments.options["--dir"] ?? defaultDirectory(invocation.environment)
            let lookup: ReportStore.Lookup
            do {
                lookup = try ReportStore(directory: directory).lookup(id: target)
            } catch {
                if error.errno == ENOENT {
                    throw CommandError.notFound("no report \(target): \(directory) does not exist")
                }
                throw error
            }
            switch lookup {
            case .found(let found): entry = found
            case .notFound: throw CommandError.notFound("no report with id \(target) in \(directory)")
            case .ambiguous(let ids):
                let shown = ids.prefix(5).joined(separator: ", ") + (ids.count > 5 ? ", …" : "")
                throw CommandError.usage("id prefix \(target) matches \(ids.count) reports: \(shown)")
            }
        }
        if invocation.arguments.has("--json") {
            console.output(String(decoding: try entry.report.encodedJSON(), as: UTF8.self))
        } else {
            let view = ReportDetailView(format: textFormat(invocation.environment), useColor: console.useColor)
            view.lines(entry.report, path: entry.path).forEach { console.print($0) }
        }
        return .ok
    }

    /// Reads an explicitly named file: missing is "not found" (1), anything else a failure (3).
    private static func load(_ path: String) throws -> StallReport {
        do {
            return try ReportStore.load(path: path)
        } catch {
            if error.errno == ENOENT { throw CommandError.notFound("no such file: \(path)") }
            throw error
        }
    }

    static func defaultDirectory(_ environment: [String: String]) -> String {
        if let configured = environment["STALLWATCH_REPORT_DIRECTORY"], !configured.isEmpty { return configured }
        return ReportWriter.defaultDirectory
    }

    /// Local time, unless `TZ` names a zone Foundation knows (tests set `TZ=UTC`).
    static func textFormat(_ environment: [String: String]) -> ReportTextFormat {
        ReportTextFormat(timeZone: environment["TZ"].flatMap { TimeZone(identifier: $0) } ?? .current)
    }
}
