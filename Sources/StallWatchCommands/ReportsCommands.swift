// ReportsCommands: the `stallwatch reports list` and `stallwatch reports show` subcommands.
import Foundation
import StallWatch
import StallWatchInspector

/// The functions behind the `reports` subcommands (see ``StallWatchCLI/subcommands``).
enum ReportsCommands {
    /// `reports list [DIR|FILE…] [--since T] [--min-duration-ms N] [--cause KIND] [--sort time|duration]
    /// [--json]`: newest (or longest) first; skipped files are warned about on standard error, one line each.
    static func list(_ invocation: Invocation) throws -> ExitCode {
        let console = invocation.console
        let arguments = invocation.arguments
        let order = try option(arguments, "--sort", default: ListOrder.time)
        let scanner = try scanner(invocation)
        var summaries: [ReportSummary] = []
        let outcome = try scanner.scan(listing: true, warn: { console.printError("stallwatch: \($0)") }) { entry in
            summaries.append(ReportSummary(path: entry.path, report: entry.report))
        }
        summaries = ReportListView.sorted(summaries, by: order)
        if arguments.has("--json") {
            console.print(try ReportListView.json(summaries))
        } else if !summaries.isEmpty {
            let view = ReportListView(format: textFormat(invocation.environment), useColor: console.useColor)
            view.lines(summaries).forEach { console.print($0) }
        }
        if summaries.isEmpty {
            console.printError("stallwatch: \(nothingFound(scanner, outcome))")
            return .notFound
        }
        return .ok
    }

    typealias ListOrder = ReportListView.Order

    /// The scanner for a command's positionals (default: the report directory) and filter options.
    static func scanner(_ invocation: Invocation) throws -> ReportScanner {
        let named = invocation.arguments.positionals
        let filter = try ReportFilter.parse(
            invocation.arguments, now: Date(), timeZone: textFormat(invocation.environment).timeZone)
        return ReportScanner(paths: named.isEmpty ? [defaultDirectory(invocation.environment)] : named, filter: filter)
    }

    /// Why a scan produced nothing, for the one line on standard error.
    static func nothingFound(_ scanner: ReportScanner, _ outcome: ReportScanner.Outcome) -> String {
        let places = scanner.paths.joined(separator: ", ")
        if outcome.missing.count == scanner.paths.count {
            return "no reports: \(places) \(scanner.paths.count == 1 ? "does" : "do") not exist"
        }
        if outcome.read > 0 { return "no reports match the filters (\(outcome.read) read in \(places))" }
        return "no reports in \(places)"
    }

    /// The value of an option that names one of an enumeration's cases.
    static func option<Value: RawRepresentable & CaseIterable>(
        _ arguments: Arguments, _ name: String, default value: Value
    ) throws(CommandError) -> Value where Value.RawValue == String {
        guard let text = arguments.options[name] else { return value }
        guard let parsed = Value(rawValue: text) else {
            let choices = Value.allCases.map(\.rawValue).joined(separator: ", ")
            throw .usage("\(name) \(text): expected one of \(choices)")
        }
        return parsed
    }

    /// `reports show FILE|ID [--dir DIR] [--json]`: a path (anything with a `/`, ending in `.json`, or naming
    /// an existing file) is read directly; anything else is a report id or unique id prefix in DIR.
    static func show(_ invocation: Invocation) throws -> ExitCode {
        let console = invocation.console
        let entry = try entry(invocation.arguments.positionals[0], invocation)
        if invocation.arguments.has("--json") {
            console.output(String(decoding: try entry.report.expandedJSON(), as: UTF8.self))
        } else {
            let view = ReportDetailView(format: textFormat(invocation.environment), useColor: console.useColor)
            view.lines(entry.report, path: entry.path, allThreads: invocation.arguments.has("--all-threads"))
                .forEach { console.print($0) }
        }
        return .ok
    }

    /// The report a command names: a path (anything with a `/`, ending in `.json`, or naming an existing file)
    /// is read directly; anything else is a report id or unique id prefix in `--dir` or the default directory.
    static func entry(_ target: String, _ invocation: Invocation) throws -> ReportStore.Entry {
        if target.contains("/") || target.hasSuffix(".json") || FileManager.default.fileExists(atPath: target) {
            return ReportStore.Entry(path: target, report: try load(target))
        }
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
        case .found(let found): return found
        case .notFound: throw CommandError.notFound("no report with id \(target) in \(directory)")
        case .ambiguous(let ids):
            let shown = ids.prefix(5).joined(separator: ", ") + (ids.count > 5 ? ", …" : "")
            throw CommandError.usage("id prefix \(target) matches \(ids.count) reports: \(shown)")
        }
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
        StallWatchConfiguration.defaultReportDirectory(environment: environment)
    }

    /// Local time, unless `TZ` names a zone Foundation knows (tests set `TZ=UTC`).
    static func textFormat(_ environment: [String: String]) -> ReportTextFormat {
        ReportTextFormat(timeZone: environment["TZ"].flatMap { TimeZone(identifier: $0) } ?? .current)
    }
}
