// DumpCommand: `stallwatch dump --pid PID [--tid TID]... [--threads [PROGRAM=]GLOB]... [--all-threads] [--json]`, the
// stacks of a live process now.
import StallWatch
import StallWatchInspector
import StallWatchSidecar

/// The function behind `stallwatch dump` (see ``StallWatchCLI/subcommands``): one ``ProcessDumper`` pass,
/// printed as text on a terminal and as JSON with `--json` or when standard output is not a terminal.
enum DumpCommand {
    static let options: Set<String> = ["--pid", "--heartbeat-dir", "--tid", "--threads"]

    static func run(_ invocation: Invocation) throws -> ExitCode {
        let args = invocation.arguments
        guard let pidText = args.options["--pid"] else { throw CommandError.usage("dump: --pid PID is required") }
        let pid = Int32(try Arguments.number(pidText, "--pid", 1...Int(Int32.max)))
        let configuration = try args.configuration(environment: invocation.environment)
        let tids = try (args.repeated["--tid"] ?? []).map {
            Int32(try Arguments.number($0, "--tid", 1...Int(Int32.max)))
        }
        let rules = try (args.repeated["--threads"] ?? []).map { text in
            do {
                return try LoopThreadRule(parsing: text)
            } catch {
                throw CommandError.usage("dump: --threads \(text): expected GLOB or PROGRAM=GLOB")
            }
        }
        let dumper = ProcessDumper(
            processID: pid, allThreads: args.has("--all-threads"), loopThreadIDs: tids, threadRules: rules,
            configuration: configuration, heartbeatDirectory: args.options["--heartbeat-dir"])
        let dump = try dumper.dump()
        let console = invocation.console
        if args.has("--json") || !console.outputIsTerminal {
            console.output(String(decoding: try dump.encodedJSON(), as: UTF8.self))
        } else {
            let view = ProcessDumpView(
                format: ReportsCommands.textFormat(invocation.environment), useColor: console.useColor,
                foldIdle: !args.has("--all-threads"))
            view.lines(dump).forEach { console.print($0) }
        }
        return .ok
    }
}
