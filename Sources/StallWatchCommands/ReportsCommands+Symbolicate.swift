// The `stallwatch reports symbolicate` subcommand: a report with its missing symbols and file:line filled in.
import Foundation
import StallWatch
import StallWatchInspector

extension ReportsCommands {
    /// `reports symbolicate FILE|ID [-o OUT] [--dir DIR]`: writes the symbolicated report (JSON, same format) to
    /// OUT or standard output; images left as they were are warned about, one line each. A binary whose
    /// build-id differs from the report's is refused (exit 3) and nothing is written.
    package static func symbolicate(_ invocation: Invocation) throws -> ExitCode {
        let console = invocation.console
        let entry = try entry(invocation.arguments.positionals[0], invocation)
        var symbolicator = ReportSymbolicator()
        if let debug = StallWatchEnvironmentVariable.debugDirectory.value(in: invocation.environment), !debug.isEmpty {
            symbolicator.debugDirectory = debug
        }
        let outcome = try symbolicator.symbolicate(entry.report)
        for warning in outcome.warnings { console.printError("stallwatch: warning: \(warning)") }
        let destination = outputPath(invocation)
        try write(try outcome.report.encodedJSON(), to: destination, invocation)
        console.printError(
            "stallwatch: \(outcome.framesFilled) frame\(outcome.framesFilled == 1 ? "" : "s") symbolicated"
                + (outcome.filesUsed.isEmpty ? "" : " from \(outcome.filesUsed.joined(separator: ", "))")
                + (destination.map { "; wrote \($0)" } ?? ""))
        return .ok
    }
}
