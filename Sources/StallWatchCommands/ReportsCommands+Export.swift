// The `stallwatch reports export` subcommand, and the report input and file output that export and html share.
import Foundation
import StallWatch
import StallWatchInspector

extension ReportsCommands {
    /// `reports export FILE|DIR|ID… --format folded|speedscope|pprof [-o PATH] [filters]`: every sample of the
    /// named reports in one profile, written to PATH (or standard output).
    public static func export(_ invocation: Invocation) throws -> ExitCode {
        guard let text = invocation.arguments.options["--format"] else {
            throw CommandError.usage(
                "reports export: --format is required (\(ProfileFormat.allCases.map(\.rawValue).joined(separator: ", ")))"
            )
        }
        let format = try option(invocation.arguments, "--format", default: ProfileFormat(rawValue: text) ?? .folded)
        let destination = outputPath(invocation)
        if format == .pprof, destination == nil, invocation.console.outputIsTerminal {
            throw CommandError.usage("reports export: pprof is binary; give -o PATH or redirect standard output")
        }
        var exporter = format.makeExporter()
        let count = try forEachNamedReport(invocation) { exporter.add($0.report) }
        guard count > 0 else { return .notFound }
        try write(try exporter.data(), to: destination, invocation)
        if let destination {
            invocation.console.printError(
                "stallwatch: wrote \(format.rawValue) profile of \(count) report\(count == 1 ? "" : "s") to \(destination)"
            )
        }
        return .ok
    }

    /// `-o PATH` / `--output PATH`; nil (or `-`) for standard output.
    static func outputPath(_ invocation: Invocation) -> String? {
        let path = invocation.arguments.options["-o"] ?? invocation.arguments.options["--output"]
        return path == "-" ? nil : path
    }

    /// Reads every report named by the positionals: directories and files are scanned (with the filter options,
    /// one warning per skipped file), anything else is a report id or prefix (``entry(_:_:)``).
    /// - Returns: how many reports `body` saw; when none, the reason has been printed on standard error.
    static func forEachNamedReport(_ invocation: Invocation, _ body: (ReportStore.Entry) throws -> Void) throws -> Int {
        let console = invocation.console
        let scanner = try scanner(invocation)
        var count = 0
        var outcome = ReportScanner.Outcome()
        for path in scanner.paths {
            if FileManager.default.fileExists(atPath: path) || path.contains("/") {
                var single = scanner
                single.paths = [path]
                var failure: (any Error)?
                let seen = try single.scan(warn: { console.printError("stallwatch: \($0)") }) { entry in
                    guard failure == nil else { return }
                    do { try body(entry) } catch { failure = error }
                    count += 1
                }
                if let failure { throw failure }
                outcome.read += seen.read
                outcome.skipped += seen.skipped
                outcome.missing += seen.missing
            } else {
                try body(try entry(path, invocation))
                outcome.read += 1
                count += 1
            }
        }
        if count == 0 { console.printError("stallwatch: \(nothingFound(scanner, outcome))") }
        return count
    }

    /// Writes `data` atomically to `path` (replacing it), or to standard output when `path` is nil.
    static func write(_ data: Data, to path: String?, _ invocation: Invocation) throws {
        guard let path else {
            invocation.console.dataOutput(data)
            return
        }
        do {
            try data.write(to: URL(fileURLWithPath: path), options: .atomic)
        } catch {
            throw CommandError(.failure, "cannot write \(path): \((error as NSError).localizedDescription)")
        }
    }
}
