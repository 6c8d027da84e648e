// CommandHelp: `stallwatch help TOPIC`, `CMD --help` with a line per option, and `--version`.

/// The help texts of the command line: one per subcommand, one per group of subcommands (`reports`).
enum CommandHelp {
    /// StallWatch's version, as `stallwatch --version` prints it.
    static let version = "1.0.0"

    /// The value placeholder (nil for a flag) and the one-line description of every option a command accepts.
    static let options: [String: (value: String?, text: String)] = [
        "--json": (nil, "print JSON instead of text (event lines: also when standard output is not a terminal)"),
        "--sort": ("time|duration", "order of the rows (default: time, newest first)"),
        "--since": ("2h|2026-11-30", "only reports that started within the duration or after the date"),
        "--min-duration-ms": ("N", "only stalls that lasted at least N ms"),
        "--cause": ("KIND", "only stalls of this cause: cpu, lock, io, sleep, deadlock, unknown"),
        "--by": ("signature|cause|frame", "what reports are grouped by (default: signature)"),
        "--dir": ("DIR", "the report directory an ID is looked up in"),
        "--all-threads": (nil, "also print every thread of the process at the first sample"),
        "--format": ("folded|speedscope|pprof", "the profile format to write"),
        "--output": ("PATH", "write to PATH instead of standard output"),
        "--pid": ("PID", "the process to watch"),
        "--tid": ("TID", "the loop thread (default: the heartbeat's thread, else the main thread)"),
        "--threshold-ms": ("N", "a loop stuck longer than N ms is a stall (default: the configuration's, 250)"),
        "--report-dir": ("DIR", "where reports are written (default: $STALLWATCH_REPORT_DIRECTORY)"),
        "--sample-interval-ms": ("N", "time between stack samples during a stall (default 50)"),
        "--heartbeat-dir": ("DIR", "where processes publish heartbeat segments (default /dev/shm)"),
        "--poll-ms": ("N", "how often the target's progress is read"),
        "--proc": (nil, "judge progress from /proc even if the process publishes a heartbeat"),
        "--lock-book": (
            nil,
            "preload the lock book into CMD (libStallWatchLockBook.so, installed beside stallwatch): it records who "
                + "last took each POSIX semaphore, so a loop waiting on one names its likely holder"
        ),
        "--metrics": ("HOST:PORT", "serve Prometheus metrics on HOST:PORT (loopback when only :PORT is given)"),
        "--otlp": ("URL", "post each ended stall to URL/v1/logs as an OTLP/HTTP log record (JSON), e.g. a collector"),
        "--heartbeat-wait-ms": ("N", "how long to wait for CMD's heartbeat before falling back to /proc"),
        "--scan-ms": ("N", "how often the heartbeat directory is scanned for new processes (default 1000)"),
        "--threads": (
            "[PROGRAM=]GLOB",
            "also watch every thread whose name matches GLOB, each its own detector, matched again as threads start, "
                + "exit or are renamed (repeatable; PROGRAM limits the rule to executables of that name)"
        ),
        "--rescan-ms": ("N", "how often --threads globs are matched against the process's threads (default 1000)"),
        "--help": (nil, "print this help"),
    ]

    /// Where one command's option means something else than the shared line says, by command words.
    static let commandOptions: [String: [String: (value: String?, text: String)]] = [
        "dump": [
            "--pid": ("PID", "the process to dump"),
            "--all-threads": (nil, "list each idle thread with its stack instead of folding them by their wait"),
            "--json": (nil, "print JSON instead of text (also when standard output is not a terminal)"),
            "--heartbeat-dir": ("DIR", "where heartbeat segments name the loop threads (default /dev/shm)"),
            "--tid": ("TID", "a loop thread, listed first (repeatable)"),
            "--threads": (
                "[PROGRAM=]GLOB",
                "the threads whose name matches GLOB are loop threads, listed first (repeatable; PROGRAM limits the rule to executables of that name)"
            ),
        ],
        "snapshot": [
            "--pid": ("PID", "the process whose embedded StallWatch writes the snapshot"),
            "--timeout-ms": ("N", "how long to wait for the answer (default 10000)"),
            "--heartbeat-dir": ("DIR", "where the process publishes its heartbeat (default /dev/shm)"),
        ],
        "tasks": [
            "--pid": ("PID", "the process whose task table to print"),
            "--hung": ("DURATION", "only the tasks suspended at least DURATION (500ms, 5s, 2m, 1h)"),
            "--json": (nil, "print JSON instead of text (also when standard output is not a terminal)"),
            "--heartbeat-dir": ("DIR", "where the process publishes its heartbeat and task table (default /dev/shm)"),
        ],
    ]

    /// Short forms of common options: `-p PID`, `-o FILE`, `-h`.
    static let shortForms: [String: String] = ["-p": "--pid", "-o": "--output", "-h": "--help"]

    /// `CMD --help`: usage, what it does, one line per option.
    static func text(for command: Subcommand) -> String {
        var lines = ["usage: \(command.usage)", "", command.summary, "", "options:"]
        var names = command.flags.union(command.options).union(["--help"])
        if names.contains("-o") { names.insert("--output") }
        names.remove("-o")
        let rows = names.sorted().map { name -> (String, String) in
            let short = shortForms.first { $0.value == name }.map { "\($0.key), " } ?? "    "
            let entry = commandOptions[command.words.joined(separator: " ")]?[name] ?? options[name] ?? (nil, "")
            return (short + name + (entry.value.map { " " + $0 } ?? ""), entry.text)
        }
        let width = rows.map(\.0.count).max() ?? 0
        for (left, text) in rows {
            lines.append("  " + left.padding(toLength: width, withPad: " ", startingAt: 0) + "  " + text)
        }
        return lines.joined(separator: "\n")
    }

    /// `stallwatch help reports`, `stallwatch reports --help`: the subcommands under `words`.
    static func text(forGroup words: [String]) -> String? {
        let members = StallWatchCLI.subcommands.filter { $0.words.starts(with: words) && $0.words.count > words.count }
        guard !members.isEmpty else { return nil }
        var lines = ["usage: stallwatch \(words.joined(separator: " ")) COMMAND [ARGS]", "", "commands:"]
        for command in members {
            lines.append("  \(command.usage)")
            lines.append("      \(command.summary)")
        }
        lines.append("")
        lines.append("see stallwatch help \(words.joined(separator: " ")) COMMAND for its options")
        return lines.joined(separator: "\n")
    }

    /// The help for `topic` (`watch`, `reports`, `reports list`); nil when there is no such topic.
    static func text(forTopic topic: [String]) -> String? {
        if let command = StallWatchCLI.subcommands.first(where: { $0.words == topic }) { return text(for: command) }
        return text(forGroup: topic)
    }
}
