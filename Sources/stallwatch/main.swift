// The stallwatch executable: parses the command line, runs the library, maps errors to exit codes.
import Foundation
import StallWatchInspector

#if canImport(Glibc)
import Glibc
#endif

let environment = ProcessInfo.processInfo.environment
let console = Console.standard(environment: environment)
let status: ExitCode
do {
    status = try StallWatchCLI.run(Array(CommandLine.arguments.dropFirst()), console: console, environment: environment)
} catch {
    console.printError(ExitCode.message(for: error))
    status = ExitCode(for: error)
}
exit(status.rawValue)
