// The `stallwatch reports html` subcommand: one self-contained page with a flame graph and a timeline.
import Foundation
import StallWatch
import StallWatchInspector

extension ReportsCommands {
    /// `reports html FILE|DIR|ID… [-o report.html] [filters]`: the page for one report (its header) or many
    /// (a grouped summary), written to PATH or standard output.
    package static func html(_ invocation: Invocation) throws -> ExitCode {
        var page = HTMLReport(format: textFormat(invocation.environment))
        let count = try forEachNamedReport(invocation) { page.add($0.report, path: $0.path) }
        guard count > 0 else { return .notFound }
        let destination = outputPath(invocation)
        try write(Data(page.render().utf8), to: destination, invocation)
        if let destination {
            invocation.console.printError(
                "stallwatch: wrote the page for \(count) report\(count == 1 ? "" : "s") to \(destination)")
        }
        return .ok
    }
}
