// SidecarCommands: `stallwatch watch`, `run` and `daemon` — watching other processes from outside.
import StallWatch
import StallWatchSidecar

enum SidecarCommands {
    static let watchOptions: Set<String> = [
        "--pid", "--tid", "--threads", "--threshold-ms", "--report-dir", "--sample-interval-ms", "--heartbeat-dir",
        "--poll-ms", "--rescan-ms", "--metrics", "--otlp",
    ]
    static let runOptions: Set<String> = [
        "--threshold-ms", "--report-dir", "--sample-interval-ms", "--heartbeat-dir", "--poll-ms", "--heartbeat-wait-ms",
        "--metrics", "--otlp",
    ]
    static let daemonOptions: Set<String> = [
        "--heartbeat-dir", "--report-dir", "--sample-interval-ms", "--scan-ms", "--threads", "--metrics", "--otlp",
    ]

    // MARK: watch

    static func watch(_ invocation: Invocation) throws -> ExitCode {
        let args = invocation.arguments
        guard let pidText = args.options["--pid"] else { throw CommandError.usage("watch: --pid PID is required") }
        let pid = try Arguments.number(pidText, "--pid", 1...Int(Int32.max))
        var options = TargetWatcher.Options(
            pid: Int32(pid), configuration: try args.configuration(environment: invocation.environment))
        try apply(args, to: &options)
        let tids = try (args.repeated["--tid"] ?? []).map {
            Int32(try Arguments.number($0, "--tid", 1...Int(Int32.max)))
        }
        let executable = ProcessIdentity.of(pid: Int32(pid)).executable
        let rules = try threadRules(args, "watch").filter { $0.applies(toExecutable: executable) }
        let rescanMs = try args.number("--rescan-ms", in: 10...600_000) ?? 1000
        if args.has("--proc") { options.mode = .proc }
        let output = EventOutput(
            console: invocation.console, arguments: args, reportDirectory: options.configuration.reportDirectoryPath)
        let (metrics, server) = try startMetrics(args, output: output)
        defer { server?.stop() }
        let otlp = try startOTLP(args, reportDirectory: options.configuration.reportDirectoryPath)
        defer { otlp?.stop() }
        // One watcher, and so one detector, per thread; each report names its thread. Threads the rules match are
        // matched again every --rescan-ms: late or renamed threads are picked up, those renamed away dropped.
        var groupOptions = ThreadGroupWatcher.Options(
            base: options, fixedThreads: tids.isEmpty && rules.isEmpty ? [nil] : tids.map { Optional($0) },
            rules: rules)
        groupOptions.rescanInterval = .milliseconds(rescanMs)
        let watched = LateReference<ThreadGroupWatcher>()
        let group = try ThreadGroupWatcher(options: groupOptions) { event in
            switch event {
            case .stall(let stall):
                metrics?.observe(stall)
                otlp?.observe(stall)
            case .watching(_, let tid, _, _):
                // A thread picked up later: its loop's series exist before its first stall.
                if let metrics, let loop = watched.object?.loopName(ofThread: tid) { metrics.declare(loop: loop) }
            default: break
            }
            output.emit(event.lineFields)
        }
        watched.object = group
        for watcher in group.watchers { metrics?.declare(loop: watcher.loopName) }
        TerminationSignals.install { _ in
            group.stop(reason: "stallwatch watch was stopped while the loop was still stuck")
        }
        group.run()
        return .ok
    }

    // MARK: run

    static func run(_ invocation: Invocation) throws -> ExitCode {
        let args = invocation.arguments
        var options = TargetWatcher.Options(
            pid: 0, configuration: try args.configuration(environment: invocation.environment))
        try apply(args, to: &options)
        if args.has("--proc") { options.mode = .proc }
        let waitMs =
            try args.number("--heartbeat-wait-ms", in: 0...60_000) ?? 1000
        let console = invocation.console
        let output = EventOutput(
            console: console, toError: true, arguments: args,
            reportDirectory: options.configuration.reportDirectoryPath)
        let (metrics, server) = try startMetrics(args, output: output)
        defer { server?.stop() }
        let otlp = try startOTLP(args, reportDirectory: options.configuration.reportDirectoryPath)
        defer { otlp?.stop() }
        let preload = args.has("--lock-book") ? [try CommandRunner.lockBookLibrary()] : []
        let status = try CommandRunner.run(
            args.positionals, options: options, preload: preload, heartbeatWait: .milliseconds(waitMs)
        ) { event in
            switch event {
            case .target(let event):
                if case .stall(let stall) = event {
                    metrics?.observe(stall)
                    otlp?.observe(stall)
                }
                output.emit(event.lineFields)
            case .watchFailed(let error): console.printError("stallwatch: \(error.message)")
            }
        }
        if status == 0 { return .ok }
        throw CommandError.commandExited(status: status)
    }

    // MARK: daemon

    static func daemon(_ invocation: Invocation) throws -> ExitCode {
        let args = invocation.arguments
        let configuration = try args.configuration(environment: invocation.environment)
        let directory = configuration.heartbeatDirectoryPath
        let scanMs = try args.number("--scan-ms", in: 10...600_000) ?? 1000
        let output = EventOutput(
            console: invocation.console, arguments: args, reportDirectory: configuration.reportDirectoryPath)
        let (metrics, server) = try startMetrics(args, output: output, labelsByProcess: true)
        defer { server?.stop() }
        let otlp = try startOTLP(args, reportDirectory: configuration.reportDirectoryPath)
        defer { otlp?.stop() }
        let watched = LateReference<SidecarDaemon>()
        let notifications = try DaemonNotifications(
            environment: invocation.environment, directory: directory, scanInterval: .milliseconds(scanMs),
            daemon: watched)
        defer { notifications.stopping() }
        let rules = try threadRules(args, "daemon")
        let daemon = SidecarDaemon(
            directory: directory, configuration: configuration, scanInterval: .milliseconds(scanMs),
            threadRules: rules
        ) { event in
            if case .target(_, .stall(let stall)) = event {
                metrics?.observe(stall)
                otlp?.observe(stall)
            }
            if case .target(let pid, .watching(_, let tid, _, _)) = event, let metrics,
                let loop = watched.object?.watchedLoop(of: pid, threadID: tid)
            {
                metrics.declare(loop: loop.loopName, executable: loop.executable, pid: pid)
            }
            notifications.observe(event)
            output.emit(event.lineFields)
        }
        watched.object = daemon
        TerminationSignals.install { _ in daemon.stop() }
        try daemon.run(onScan: notifications.scanned)
        return .ok
    }

    // MARK: Helpers

    /// With `--metrics HOST:PORT` (loopback unless a host is given): Prometheus text of the stalls seen, served
    /// on its own thread; announces the bound address as a JSON line.
    private static func startMetrics(_ args: Arguments, output: EventOutput, labelsByProcess: Bool = false) throws
        -> (StallMetrics?, MetricsHTTPServer?)
    {
        guard let address = args.options["--metrics"] else { return (nil, nil) }
        let metrics = StallMetrics(labelsByProcess: labelsByProcess)
        let server = try MetricsHTTPServer(address: address) { metrics.exposition() }
        try server.start()
        output.emit([
            "event": .string("metrics"), "address": .string("\(server.host):\(server.port)"),
            "path": .string("/metrics"),
        ])
        return (metrics, server)
    }

    /// With `--otlp URL`: each ended stall posted to URL/v1/logs as an OTLP log record, from the exporter's thread.
    private static func startOTLP(_ args: Arguments, reportDirectory: String) throws -> OTLPLogExporter? {
        guard let endpoint = args.options["--otlp"] else { return nil }
        return try OTLPLogExporter(endpoint: endpoint, reportDirectory: reportDirectory)
    }

    private static func apply(_ args: Arguments, to options: inout TargetWatcher.Options) throws {
        options.thresholdFixed = args.options["--threshold-ms"] != nil
        options.heartbeatDirectory = options.configuration.heartbeatDirectoryPath
        if let poll = try args.number("--poll-ms", in: 1...60_000) { options.pollIntervalMs = poll }
    }

    /// `--threads [PROGRAM=]GLOB`, repeatable.
    private static func threadRules(_ args: Arguments, _ command: String) throws -> [LoopThreadRule] {
        try (args.repeated["--threads"] ?? []).map { text in
            do {
                return try LoopThreadRule(parsing: text)
            } catch {
                throw CommandError.usage("\(command): --threads \(text): expected GLOB or PROGRAM=GLOB")
            }
        }
    }
}
