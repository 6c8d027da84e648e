// SnapshotCommand: `stallwatch snapshot --pid PID [--timeout-ms N]`, a lead-up report asked of a running process.
import StallWatch
import StallWatchSidecar

/// The function behind `stallwatch snapshot` (see ``StallWatchCLI/subcommands``): asks the process's embedded
/// watchdog for a snapshot through its heartbeat segment (``SnapshotRequester``: no signal, nothing is stopped) and
/// prints the path of each report written, one per watched loop.
enum SnapshotCommand {
    static let options: Set<String> = ["--pid", "--timeout-ms", "--heartbeat-dir"]
    static let defaultTimeoutMs = 10_000

    static func run(_ invocation: Invocation) throws -> ExitCode {
        let args = invocation.arguments
        guard let pidText = args.options["--pid"] else { throw CommandError.usage("snapshot: --pid PID is required") }
        let pid = Int32(try Arguments.number(pidText, "--pid", 1...Int(Int32.max)))
        let timeoutMs = try args.options["--timeout-ms"].map { try Arguments.number($0, "--timeout-ms", 1...3_600_000) }
        let configuration = try args.configuration(environment: invocation.environment)
        let directory = args.options["--heartbeat-dir"] ?? configuration.heartbeatDirectoryPath
        let answers = try SnapshotRequester.request(
            pid: pid, directory: directory, timeoutNanos: UInt64(timeoutMs ?? defaultTimeoutMs) * 1_000_000)
        let console = invocation.console
        for answer in answers {
            if let path = answer.reportPath {
                console.print(path)
            } else {
                console.printError("stallwatch: loop '\(answer.loopName)' wrote no snapshot: \(answer.failure ?? "")")
            }
        }
        guard answers.contains(where: { $0.reportPath != nil }) else {
            throw SidecarError(
                .snapshotRefused,
                "pid \(pid) wrote no snapshot: \(answers.compactMap(\.failure).joined(separator: "; "))")
        }
        return .ok
    }
}
