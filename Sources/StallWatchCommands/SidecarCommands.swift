// SidecarCommands: `stallwatch watch`, `run` and `daemon` — watching other processes from outside.
import Foundation
import StallWatch
import StallWatchSidecar
import Synchronization

/// `stallwatch run` ends with the command's own status, which is not one of ``ExitCode``'s: `main` exits with it.
public struct ChildExitStatus: Error, Sendable, Equatable {
    /// The child's exit status, or 128 + the signal that killed it.
    public var status: Int32
}

enum SidecarCommands {
    static let watchOptions: Set<String> = [
        "--pid", "--tid", "--threshold-ms", "--report-dir", "--sample-interval-ms", "--heartbeat-dir", "--poll-ms",
        "--metrics",
    ]
    static let runOptions: Set<String> = [
        "--threshold-ms", "--report-dir", "--sample-interval-ms", "--heartbeat-dir", "--poll-ms", "--heartbeat-wait-ms",
        "--metrics",
    ]
    static let daemonOptions: Set<String> = [
        "--heartbeat-dir", "--report-dir", "--sample-interval-ms", "--scan-ms", "--metrics",
    ]

    // MARK: watch

    static func watch(_ invocation: Invocation) throws -> ExitCode {
        let args = invocation.arguments
        guard let pidText = args.options["--pid"] else { throw CommandError.usage("watch: --pid PID is required") }
        let pid = try number(pidText, "--pid", 1...Int(Int32.max))
        var options = TargetWatcher.Options(pid: Int32(pid), configuration: try configuration(args, invocation))
        try apply(args, to: &options)
        if let tid = args.options["--tid"] { options.threadID = Int32(try number(tid, "--tid", 1...Int(Int32.max))) }
        if args.has("--proc") { options.mode = .proc }
        let console = invocation.console
        let (metrics, server) = try startMetrics(args, console: console)
        defer { server?.stop() }
        let watcher = try TargetWatcher(options: options) { event in
            if case .stall(let stall) = event { metrics?.observe(stall) }
            print(event, console: console)
        }
        TerminationSignals.install { _ in
            watcher.stop(reason: "stallwatch watch was stopped while the loop was still stuck")
        }
        _ = watcher.run()
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
        let (metrics, server) = try startMetrics(args, console: console, toError: true)
        defer { server?.stop() }
        // Forward SIGINT/SIGTERM/SIGHUP to the child; we exit when it does.
        let child = Mutex<ChildProcess?>(nil)
        TerminationSignals.install { signal in child.withLock { $0?.send(signal) } }
        let started = try ChildProcess.spawn(args.positionals)
        child.withLock { $0 = started }
        options.pid = started.pid

        let done = DispatchSemaphore(value: 0)
        let watcherBox = Mutex<TargetWatcher?>(nil)
        let stopped = Atomic<Bool>(false)
        let watchOptions = options
        let thread = Thread {
            defer { done.signal() }
            // Give the command time to publish its heartbeat before settling for /proc evidence.
            let deadline = DispatchTime.now() + .milliseconds(waitMs)
            var watcher: TargetWatcher?
            while !stopped.load(ordering: .acquiring) {
                do {
                    let candidate = try TargetWatcher(options: watchOptions) { event in
                        if case .stall(let stall) = event { metrics?.observe(stall) }
                        print(event, console: console, toError: true)
                    }
                    if candidate.source == "heartbeat" || watchOptions.mode == .proc || DispatchTime.now() >= deadline {
                        watcher = candidate
                        break
                    }
                } catch let error as SidecarError {
                    if error.code == .noSuchProcess { return }  // the command exited already
                    console.printError("stallwatch: \(error.message)")
                    return
                } catch {
                    return
                }
                usleep(20_000)
            }
            guard let watcher else { return }
            watcherBox.withLock { $0 = watcher }
            if stopped.load(ordering: .acquiring) { return }
            _ = watcher.run()
        }
        thread.name = "stallwatch-run-watch"
        thread.start()
        let status = started.wait()
        stopped.store(true, ordering: .releasing)
        watcherBox.withLock {
            $0?.stop(reason: "the command exited (status \(status)) while its loop was still stuck")
        }
        done.wait()
        watcherBox.withLock { $0?.stop() }
        if status == 0 { return .ok }
        throw ChildExitStatus(status: status)
    }

    // MARK: daemon

    static func daemon(_ invocation: Invocation) throws -> ExitCode {
        let args = invocation.arguments
        let configuration = try configuration(args, invocation)
        let directory =
            args.options["--heartbeat-dir"]
            ?? (configuration.heartbeatDirectory.isEmpty
                ? HeartbeatPublisher.defaultDirectory : configuration.heartbeatDirectory)
        let scanMs = try args.options["--scan-ms"].map { try number($0, "--scan-ms", 10...600_000) } ?? 1000
        let console = invocation.console
        let (metrics, server) = try startMetrics(args, console: console)
        defer { server?.stop() }
        let daemon = SidecarDaemon(
            directory: directory, configuration: configuration, scanInterval: .milliseconds(scanMs)
        ) { event in
            switch event {
            case .skipped(let path, let error):
                emit(["event": "skipped", "path": path, "error": error.message], console: console)
            case .removedStale(let path, let pid):
                emit(["event": "removedStale", "path": path, "pid": Int(pid)], console: console)
            case .target(_, let event):
                if case .stall(let stall) = event { metrics?.observe(stall) }
                print(event, console: console)
            }
        }
        TerminationSignals.install { _ in daemon.stop() }
        try daemon.run()
        return .ok
    }

    // MARK: Helpers

    /// With `--metrics HOST:PORT` (loopback unless a host is given): Prometheus text of the stalls seen, served
    /// on its own thread; announces the bound address as a JSON line.
    private static func startMetrics(_ args: Arguments, console: Console, toError: Bool = false) throws
        -> (StallMetrics?, MetricsHTTPServer?)
    {
        guard let address = args.options["--metrics"] else { return (nil, nil) }
        let metrics = StallMetrics()
        let server = try MetricsHTTPServer(address: address) { metrics.exposition() }
        try server.start()
        let line: [String: Any] = ["event": "metrics", "address": "\(server.host):\(server.port)", "path": "/metrics"]
        if let data = try? JSONSerialization.data(withJSONObject: line, options: [.sortedKeys]) {
            let text = String(decoding: data, as: UTF8.self)
            if toError { console.printError(text) } else { console.print(text) }
        }
        return (metrics, server)
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
        let dir = options.configuration.heartbeatDirectory
        options.heartbeatDirectory = dir.isEmpty ? HeartbeatPublisher.defaultDirectory : dir
        if let text = args.options["--poll-ms"] { options.pollIntervalMs = try number(text, "--poll-ms", 1...60_000) }
    }

    private static func number(_ text: String, _ name: String, _ range: ClosedRange<Int>) throws -> Int {
        guard let value = Int(text), range.contains(value) else {
            throw CommandError.usage(
                "\(name) \(text): expected an integer from \(range.lowerBound) to \(range.upperBound)")
        }
        return value
    }

    /// One JSON line per event: on stdout for `watch`/`daemon`, on stderr for `run` (stdout is the command's).
    static func print(_ event: SidecarEvent, console: Console, toError: Bool = false) {
        var line: [String: Any]
        switch event {
        case .watching(let pid, let tid, let source, let threshold):
            line = ["event": "watching", "pid": pid, "threadId": tid, "source": source, "thresholdMs": threshold]
        case .heartbeatRejected(let error):
            line = ["event": "heartbeatRejected", "error": error.message]
        case .targetExited(let pid):
            line = ["event": "targetExited", "pid": pid]
        case .stall(let stall):
            switch stall {
            case .began(let r):
                line = [
                    "event": "began", "id": r.id, "pid": r.process.pid, "phase": r.loop.phase,
                    "source": r.detection.source, "thresholdMs": r.detection.thresholdMs,
                ]
            case .sampled: return
            case .escalated(let r): line = ["event": "escalated", "id": r.id, "severity": r.severity.rawValue]
            case .ended(let r):
                line = [
                    "event": "ended", "id": r.id, "pid": r.process.pid, "status": r.status.rawValue,
                    "durationMs": r.durationMs, "samples": r.samples.count,
                    "top": r.applicationFrame?.function ?? "?",
                    "cause": r.cause?.kind.rawValue ?? "unknown",
                ]
            case .lateWakeup(let delay): line = ["event": "lateWakeup", "delayMs": delay]
            case .reportFailed(let error): line = ["event": "reportFailed", "error": error.message]
            }
        }
        emit(line, console: console, toError: toError)
    }

    private static func emit(_ line: [String: Any], console: Console, toError: Bool = false) {
        guard let data = try? JSONSerialization.data(withJSONObject: line, options: [.sortedKeys]),
            let text = String(data: data, encoding: .utf8)
        else { return }
        if toError { console.printError(text) } else { console.print(text) }
    }
}
