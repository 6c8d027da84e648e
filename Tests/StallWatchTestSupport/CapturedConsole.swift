// CapturedConsole: running the command line in this process, as its main does, with what it writes kept for
// comparison.
import Foundation
import StallWatchCommands

/// Collects what a command writes, for comparison.
package final class CapturedConsole: @unchecked Sendable {
    private let lock = NSLock()
    private var out = ""
    private var err = ""
    package var standardOutput: String { lock.withLock { out } }
    package var standardError: String { lock.withLock { err } }
    package var console: Console {
        Console(
            output: { text in self.lock.withLock { self.out += text } },
            errorOutput: { text in self.lock.withLock { self.err += text } }, useColor: false)
    }

    /// Runs the CLI as `main.swift` does, mapping errors the same way.
    package static func run(
        _ arguments: [String], environment: [String: String] = ["TZ": "UTC"]
    ) -> (ExitCode, CapturedConsole) {
        let captured = CapturedConsole()
        do {
            return (try StallWatchCLI.run(arguments, console: captured.console, environment: environment), captured)
        } catch {
            captured.console.printError(ExitCode.message(for: error))
            return (ExitCode(for: error), captured)
        }
    }
}
