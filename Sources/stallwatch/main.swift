// The stallwatch executable: parses the command line, runs the library, maps errors to exit codes.
import Foundation
import StallWatchCommands

#if canImport(Glibc)
    import Glibc
#endif

let environment = ProcessInfo.processInfo.environment
let console = Console.standard(environment: environment)
let status: Int32
do {
    status = try StallWatchCLI.run(Array(CommandLine.arguments.dropFirst()), console: console, environment: environment)
        .rawValue
} catch let error as CommandError where error.commandStatus != nil {
    status = error.commandStatus!  // `stallwatch run`: the command's own status
} catch {
    console.printError(ExitCode.message(for: error))
    status = ExitCode(for: error).rawValue
}
exit(status)
