// StallWatchCLI: the subcommand table, dispatch and help of the `stallwatch` executable.

/// One `stallwatch` subcommand: its words, what it accepts, and the function that runs it.
///
/// Adding a subcommand is one entry in ``StallWatchCLI/subcommands`` plus the function it names.
struct Subcommand: Sendable {
    /// The words that select it, e.g. `["reports", "list"]`.
    let words: [String]
    /// Arguments after the words, for help: `[DIR] [--json]`.
    let synopsis: String
    let summary: String
    let flags: Set<String>
    let options: Set<String>
    let positionals: ClosedRange<Int>
    let run: @Sendable (Invocation) throws -> ExitCode

    init(
        _ words: [String], synopsis: String, summary: String, flags: Set<String> = [], options: Set<String> = [],
        positionals: ClosedRange<Int> = 0...0, run: @escaping @Sendable (Invocation) throws -> ExitCode
    ) {
        self.words = words
        self.synopsis = synopsis
        self.summary = summary
        self.flags = flags
        self.options = options
        self.positionals = positionals
        self.run = run
    }

    /// `stallwatch reports list [DIR] [--json]`
    var usage: String { (["stallwatch"] + words + [synopsis]).filter { !$0.isEmpty }.joined(separator: " ") }
}

/// What a subcommand's function receives.
struct Invocation: Sendable {
    let arguments: Arguments
    let console: Console
    let environment: [String: String]
}

/// Entry point of the `stallwatch` command line, as a library so that tests can drive it.
public enum StallWatchCLI {
    /// Every subcommand, in help order.
    static let subcommands: [Subcommand] = [
        Subcommand(
            ["reports", "list"], synopsis: "[DIR|FILE…] [FILTERS] [--sort time|duration] [--json]",
            summary: "list reports (default directory: $STALLWATCH_REPORT_DIRECTORY or /var/tmp/stallwatch-UID), "
                + "newest first; FILTERS: --since 2h|2026-11-30, --min-duration-ms N, --cause KIND",
            flags: ["--json"], options: filterOptions.union(["--sort"]), positionals: 0...Int.max,
            run: ReportsCommands.list),
        Subcommand(
            ["reports", "show"], synopsis: "FILE|ID [--dir DIR] [--json] [--all-threads]",
            summary: "show one report (header, point stack, call tree, samples), by path or by id (or unique id "
                + "prefix) in DIR",
            flags: ["--json", "--all-threads"], options: ["--dir"], positionals: 1...1, run: ReportsCommands.show),
        Subcommand(
            ["reports", "summary"], synopsis: "[DIR|FILE…] [FILTERS] [--by signature|cause|frame] [--json]",
            summary: "group reports by signature, cause or top frame: count, total, p50/p95/max, first/last seen; "
                + "the costliest first",
            flags: ["--json"], options: filterOptions.union(["--by"]), positionals: 0...Int.max,
            run: ReportsCommands.summary),
        Subcommand(
            ["reports", "export"], synopsis: "FILE|DIR|ID… --format folded|speedscope|pprof [-o PATH] [FILTERS]",
            summary: "write the samples of the reports as folded stacks (flamegraph.pl), a speedscope file or a "
                + "gzipped pprof profile, to PATH or standard output",
            options: filterOptions.union(["--format", "-o", "--output", "--dir"]), positionals: 1...Int.max,
            run: ReportsCommands.export),
        Subcommand(
            ["reports", "html"], synopsis: "FILE|DIR|ID… [-o report.html] [FILTERS]",
            summary: "write one self-contained HTML page: header or grouped summary, SVG flame graph, timeline",
            options: filterOptions.union(["-o", "--output", "--dir"]), positionals: 1...Int.max,
            run: ReportsCommands.html),
        Subcommand(
            ["reports", "symbolicate"], synopsis: "FILE|ID [-o OUT] [--dir DIR]",
            summary: "fill in missing symbols and file:line from this machine's binaries or /usr/lib/debug, matched "
                + "by build-id; write the report to OUT or standard output",
            options: ["-o", "--output", "--dir"], positionals: 1...1, run: ReportsCommands.symbolicate),
        Subcommand(
            ["watch"],
            synopsis:
                "-p|--pid PID [--tid TID]... [--threads [PROGRAM=]GLOB]... [--rescan-ms N] [--threshold-ms N] [--report-dir DIR] [--sample-interval-ms N] [--heartbeat-dir DIR] [--poll-ms N] [--proc] [--metrics HOST:PORT] [--otlp URL]",
            summary:
                "watch a running process's loop from outside: its heartbeat segment if it publishes one, else /proc evidence (--proc forces it); several loop threads with --tid or --threads GLOB (both repeatable; globs matched again every --rescan-ms), each its own detector; stack samples by ptrace; one line per event (JSON with --json or when standard output is not a terminal)",
            flags: ["--proc", "--json"], options: SidecarCommands.watchOptions, run: SidecarCommands.watch),
        Subcommand(
            ["run"],
            synopsis:
                "[--threshold-ms N] [--report-dir DIR] [--sample-interval-ms N] [--heartbeat-dir DIR] [--heartbeat-wait-ms N] [--proc] [--lock-book] [--metrics HOST:PORT] [--otlp URL] -- CMD [ARGS...]",
            summary:
                "start CMD and watch it as `watch` does; SIGINT/SIGTERM/SIGHUP are forwarded; exits with CMD's status (128+N if killed by signal N; 127 if it cannot start); events on stderr",
            flags: ["--proc", "--json", "--lock-book"], options: SidecarCommands.runOptions, positionals: 1...100_000,
            run: SidecarCommands.run),
        Subcommand(
            ["dump"],
            synopsis:
                "-p|--pid PID [--tid TID]... [--threads [PROGRAM=]GLOB]... [--all-threads] [--json] [--heartbeat-dir DIR]",
            summary:
                "print every thread of a running process now, most relevant first: a deadlock, the loop threads (--tid, --threads, a heartbeat segment, else the main thread; stuck ones first), the owners and candidate holders of what stuck threads wait for, other stuck threads, then idle ones (folded into one line per identical wait; --all-threads shows each, with its stack); each with its state, how long it has been blocked (at least), system call, wait target and lock owner; one thread is stopped at a time, for one stack copy (JSON with --json or when standard output is not a terminal)",
            flags: ["--all-threads", "--json"], options: DumpCommand.options, run: DumpCommand.run),
        Subcommand(
            ["tasks"], synopsis: "-p|--pid PID [--hung DURATION] [--json] [--heartbeat-dir DIR]",
            summary:
                "print the Swift tasks of a running process from the task table it publishes beside its heartbeat (ConcurrencyWatchdog with the heartbeat on): each task's state after its last job and for how long, when it was first seen, its runs; --hung 5s keeps the tasks suspended at least that long; no ptrace, nothing is stopped (JSON with --json or when standard output is not a terminal)",
            flags: ["--json"], options: TasksCommand.options, run: TasksCommand.run),
        Subcommand(
            ["snapshot"], synopsis: "-p|--pid PID [--timeout-ms N] [--heartbeat-dir DIR]",
            summary:
                "ask the StallWatch embedded in a running process for a snapshot of each watched loop's lead-up (its last seconds: buckets, long items, the longest ones), written as a report without a stall; the request goes through its heartbeat segment (no signal, nothing is stopped) and is served when its watchdog next wakes (while the loop works); prints each report's path; exit 7 when the process publishes no heartbeat or does not answer within --timeout-ms (default 10000)",
            options: SnapshotCommand.options, run: SnapshotCommand.run),
        Subcommand(
            ["daemon"],
            synopsis:
                "[--heartbeat-dir DIR] [--report-dir DIR] [--sample-interval-ms N] [--scan-ms N] [--threads [PROGRAM=]GLOB]... [--metrics HOST:PORT] [--otlp URL]",
            summary:
                "watch every process that publishes a heartbeat in DIR (default /dev/shm), picking up new ones and dropping exited ones, until SIGINT/SIGTERM; --threads also watches each process's threads named by GLOB from /proc, each its own detector, rematched at every scan",
            flags: ["--json"], options: SidecarCommands.daemonOptions, run: SidecarCommands.daemon),
    ]

    /// The options every multi-report command accepts (``ReportFilter``).
    static let filterOptions: Set<String> = ["--since", "--min-duration-ms", "--cause"]

    /// Runs the command line `arguments` (without the program name).
    /// - Returns: the exit code for a command that ran to completion.
    /// - Throws: ``CommandError`` or `StallWatchError`; map it with ``ExitCode/init(for:)`` and
    ///   ``ExitCode/message(for:)``.
    public static func run(_ arguments: [String], console: Console, environment: [String: String]) throws -> ExitCode {
        guard let first = arguments.first, !["-h", "--help"].contains(first) else {
            console.print(help)
            return arguments.isEmpty ? .usage : .ok
        }
        if ["--version", "-V", "version"].contains(first) {
            console.print("stallwatch \(CommandHelp.version)")
            return .ok
        }
        if first == "help" {
            let topic = Array(arguments.dropFirst())
            guard !topic.isEmpty else {
                console.print(help)
                return .ok
            }
            guard let text = CommandHelp.text(forTopic: topic) else {
                let topics = subcommands.map { $0.words.joined(separator: " ") } + ["reports"]
                throw CommandError.usage(
                    "help: no topic \(topic.joined(separator: " "))"
                        + Suggestion.hint(for: topic.joined(separator: " "), in: topics))
            }
            console.print(text)
            return .ok
        }
        EnvironmentCheck.warnAboutUnknownVariables(environment, console: console)
        let matched = subcommands.filter { arguments.starts(with: $0.words) }.max { $0.words.count < $1.words.count }
        guard let command = matched else {
            let group = subcommands.filter { $0.words.first == first && $0.words.count > 1 }
            if !group.isEmpty {
                if arguments.count == 2, ["-h", "--help"].contains(arguments[1]),
                    let text = CommandHelp.text(forGroup: [first])
                {
                    console.print(text)
                    return .ok
                }
                let known = group.map { $0.words.joined(separator: " ") }
                let second = arguments.count > 1 ? "\(first) \(arguments[1])" : first
                throw CommandError.usage(
                    "\(first): expected one of: \(known.joined(separator: ", "))\(Suggestion.hint(for: second, in: known)) "
                        + "(see stallwatch help \(first))")
            }
            let words = Set(subcommands.map { $0.words[0] } + ["help", "version"])
            throw CommandError.usage(
                "unknown command \(first)\(Suggestion.hint(for: first, in: words.sorted())) (see stallwatch --help)")
        }
        let name = command.words.joined(separator: " ")
        let parsed = try Arguments.parse(
            Array(arguments.dropFirst(command.words.count)), flags: command.flags, options: command.options,
            positionals: command.positionals, command: name)
        if parsed.has("--help") {
            console.print(CommandHelp.text(for: command))
            return .ok
        }
        return try command.run(Invocation(arguments: parsed, console: console, environment: environment))
    }

    /// The text of `stallwatch --help`: commands, environment and exit codes.
    package static var help: String {
        var lines = [
            "usage: stallwatch COMMAND [ARGS]   (stallwatch help COMMAND, stallwatch COMMAND --help: its options)", "",
            "commands:",
        ]
        for command in subcommands {
            lines.append("  \(command.usage)")
            lines.append("      \(command.summary)")
        }
        lines += [
            "", "environment:",
            "  STALLWATCH_REPORT_DIRECTORY  default report directory",
            "  NO_COLOR, TERM=dumb          disable colour (colour is only used on a terminal)",
            "  STALLWATCH_<KEY>             any configuration key (watch/run/daemon), e.g. STALLWATCH_THRESHOLD_MS",
            "", "exit codes:",
        ]
        for code in ExitCode.allCases { lines.append("  \(code.rawValue)  \(code.meaning)") }
        lines.append("  run: CMD's own exit status; 128+N when CMD was killed by signal N")
        return lines.joined(separator: "\n")
    }
}
