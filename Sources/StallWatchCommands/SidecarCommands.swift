// SidecarCommands: `stallwatch watch`, `run` and `daemon` — watching other processes from outside.
import StallWatch
import StallWatchSidecar

/// `stallwatch run` ends with the command's own status, which is not one of ``ExitCode``'s: `main` exits with it.
public struct ChildExitStatus: Error, Sendable, Equatable {
    /// The child's exit status, or 128 + the signal that killed it.
    public var status: Int32
}

enum SidecarCommands {
    static let watchOptions: Set<String> = [
        "--pid", "--tid", "--threads", "--threshold-ms", "--report-dir", "--sample-interval-ms", "--heartbeat-dir",
        "--poll-ms", "--metrics", "--otlp",
    ]
    static let runOptions: Set<String> = [
        "--threshold-ms", "--report-dir", "--sample-interval-ms", "--heartbeat-dir", "--poll-ms", "--heartbeat-wait-ms",
        "--metrics", "--otlp",
    ]
    static let daemonOptions: Set<String> = [
        "--heartbeat-dir", "--report-dir", "--sample-interval-ms", "--scan-ms", "--metrics", "--otlp",
    ]

    // MARK: watch

    static func watch(_ invocation: Invocation) throws -> ExitCode {
        let args = invocation.arguments
        guard let pidText = args.options["--pid"] else { throw CommandError.usage("watch: --pid PID is required") }
        let pid = try number(pidText, "--pid", 1...Int(Int32.max))
        var options = TargetWatcher.Options(pid: Int32(pid), configuration: try configuration(args, invocation))
        try apply(args, to: &options)
        var tids = try (args.repeated["--tid"] ?? []).map { Int32(try number($0, "--tid", 1...Int(Int32.max))) }
        if let glob = args.options["--threads"] {
            let named = ThreadProbe.threadIDs(pid: Int32(pid), nameMatching: glob)
            guard !named.isEmpty else {
                throw CommandError.usage("watch: no thread of \(pid) has a name matching \(glob)")
            }
            tids += named.filter { !tids.contains($0) }
        }
        if args.has("--proc") { options.mode = .proc }
        let output = EventOutput(
            console: invocation.console, arguments: args, reportDirectory: options.configuration.reportDirectoryPath)
        let (metrics, server) = try startMetrics(args, output: output)
        defer { server?.stop() }
        let otlp = try startOTLP(args, reportDirectory: options.configuration.reportDirectoryPath)
        defer { otlp?.stop() }
        // One watcher, and so one detector, per thread; each report names its thread.
        let watchers = try (tids.isEmpty ? [nil] : tids.map { Optional($0) }).map { tid in
            var threadOptions = options
            threadOptions.threadID = tid
            return try TargetWatcher(options: threadOptions) { event in
                if case .stall(let stall) = event {
                    metrics?.observe(stall)
                    otlp?.observe(stall)
                }
                output.emit(event.lineFields)
            }
        }
        for watcher in watchers { metrics?.declare(loop: watcher.loopName) }
        TerminationSignals.install { _ in
            for watcher in watchers {
                watcher.stop(reason: "stallwatch watch was stopped while the loop was still stuck")
            }
        }
        TargetWatcher.runAll(watchers)
        return .ok
    }

    // MARK: run

    static func run(_ invocation: Invocation) throws -> ExitCode {
        let args = invocation.arguments
        var options = TargetWatcher.Options(pid: 0, configuration: try configuration(args, invocation))
        try apply(args, to: &options)
        if args.has("--proc") { options.mode = .proc }
        let waitMs =
            try args.options["--heartbeat-wait-ms"].map { try number($0, "--heartbeat-wait-ms", 0...60_000) } ?? 1000
        let console = invocation.console
        let output = EventOutput(
            console: console, toError: true, arguments: args,
            reportDirectory: options.configuration.reportDirectoryPath)
        let (metrics, server) = try startMetrics(args, output: output)
        defer { server?.stop() }
        let otlp = try startOTLP(args, reportDirectory: options.configuration.reportDirectoryPath)
        defer { otlp?.stop() }
        let status = try CommandRunner.run(args.positionals, options: options, heartbeatWait: .milliseconds(waitMs)) {
            event in
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
        throw ChildExitStatus(status: status)
    }

    // MARK: daemon

    static func daemon(_ invocation: Invocation) throws -> ExitCode {
        let args = invocation.arguments
        let configuration = try configuration(args, invocation)
        let directory = configuration.heartbeatDirectoryPath
        let scanMs = try args.options["--scan-ms"].map { try number($0, "--scan-ms", 10...600_000) } ?? 1000
        let output = EventOutput(
            console: invocation.console, arguments: args, reportDirectory: configuration.reportDirectoryPath)
        let (metrics, server) = try startMetrics(args, output: output, labelsByProcess: true)
        defer { server?.stop() }
        let otlp = try startOTLP(args, reportDirectory: configuration.reportDirectoryPath)
        defer { otlp?.stop() }
        let watched = DaemonReference()
        let notifications = try DaemonNotifications(
            environment: invocation.environment, directory: directory, scanInterval: .milliseconds(scanMs),
            daemon: watched)
        defer { notifications.stopping() }
        let daemon = SidecarDaemon(
            directory: directory, configuration: configuration, scanInterval: .milliseconds(scanMs)
        ) { event in
            if case .target(_, .stall(let stall)) = event {
                metrics?.observe(stall)
                otlp?.observe(stall)
            }
            if case .target(let pid, .watching) = event, let metrics, let loop = watched.daemon?.watchedLoop(of: pid) {
                metrics.declare(loop: loop.loopName, executable: loop.executable, pid: pid)
            }
            notifications.observe(event)
            output.emit(event.lineFields)
        }
        watched.daemon = daemon
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

    private static func configuration(_ args: Arguments, _ invocation: Invocation) throws -> StallWatchConfiguration {
        var configuration = try StallWatchConfiguration.load(environment: invocation.environment)
        if let dir = args.options["--report-dir"] { configuration.reportDirectory = dir }
        if let text = args.options["--threshold-ms"] {
            configuration.thresholdMs = try number(text, "--threshold-ms", 10...600_000)
            configuration.hangThresholdMs = max(configuration.hangThresholdMs, configuration.thresholdMs)
        }
        if let text = args.options["--sample-interval-ms"] {
            configuration.sampleIntervalMs = try number(text, "--sample-interval-ms", 1...60_000)
        }
        if let dir = args.options["--heartbeat-dir"] { configuration.heartbeatDirectory = dir }
        return configuration
    }

    private static func apply(_ args: Arguments, to options: inout TargetWatcher.Options) throws {
        options.thresholdFixed = args.options["--threshold-ms"] != nil
        options.heartbeatDirectory = options.configuration.heartbeatDirectoryPath
        if let text = args.options["--poll-ms"] { options.pollIntervalMs = try number(text, "--poll-ms", 1...60_000) }
    }

    private static func number(_ text: String, _ name: String, _ range: ClosedRange<Int>) throws -> Int {
        guard let value = Int(text), range.contains(value) else {
            throw CommandError.usage(
                "\(name) \(text): expected an integer from \(range.lowerBound) to \(range.upperBound)")
        }
        return value
    }
}
