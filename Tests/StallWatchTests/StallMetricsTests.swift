// The Prometheus text: what it counts, that promtool and the reference parser accept it, and its endpoint.
import Foundation
import StallWatchTestSupport
import Testing

@testable import StallWatch

#if canImport(Glibc)
    import Glibc
#endif

@Suite(.offPool) struct StallMetricsTests {
    static func report(
        id: String, loop: String = "main", durationMs: Double, severity: StallReport.Severity = .stall,
        status: StallReport.Status = .ended, cause: StallReport.Cause.Kind? = nil
    ) -> StallReport {
        var r = ReportSamples.report(id: id, status: status)
        r.loop.name = loop
        r.durationMs = durationMs
        r.severity = severity
        r.cause = cause.map { .init(kind: $0, evidence: []) }
        return r
    }

    /// Metrics after a stall and a hang on "main", an unrecovered stall on a loop with an awkward name, samples,
    /// a late wake-up and a failed report.
    static func populated() throws -> (StallMetrics, EventLoop) {
        let loop = try EventLoop(name: "ma\"in\\x\n", mainQueue: .disabled)
        let metrics = StallMetrics(loops: [loop])
        let events: [StallEvent] = [
            .began(report(id: "a", durationMs: 250, status: .ongoing)),
            .sampled(reportID: "a", index: 0, pauseMicros: 12.5),
            .sampled(reportID: "a", index: 1, pauseMicros: 48),
            .sampled(reportID: "a", index: 2, pauseMicros: nil),
            .ended(report(id: "a", durationMs: 300, cause: .sleep)),
            .began(report(id: "b", durationMs: 250, status: .ongoing)),
            .escalated(report(id: "b", durationMs: 5000, severity: .hang, status: .ongoing)),
            .ended(report(id: "b", durationMs: 6200, severity: .hang, cause: .cpu)),
            .began(report(id: "c", loop: loop.name, durationMs: 250, status: .ongoing)),
            .ended(report(id: "c", loop: loop.name, durationMs: 400, status: .unrecovered)),
            .began(report(id: "d", durationMs: 250, status: .ongoing)),
            .lateWakeup(delayMs: 80),
            .reportFailed(StallWatchError(.report, "disk full")),
        ]
        events.forEach(metrics.observe)
        return (metrics, loop)
    }

    @Test func countsStallsByCauseAndSeverityAndHistogramsTheirDurations() throws {
        let (metrics, _) = try Self.populated()
        let text = metrics.exposition()
        let lines = Set(text.split(separator: "\n").map(String.init))
        for expected in [
            #"stallwatch_stalls_total{cause="sleep",loop="main",severity="stall"} 1"#,
            #"stallwatch_stalls_total{cause="cpu",loop="main",severity="hang"} 1"#,
            #"stallwatch_stalls_total{cause="unknown",loop="ma\"in\\x\n",severity="stall"} 1"#,
            #"stallwatch_stall_duration_seconds_bucket{loop="main",le="0.25"} 0"#,
            #"stallwatch_stall_duration_seconds_bucket{loop="main",le="0.5"} 1"#,
            #"stallwatch_stall_duration_seconds_bucket{loop="main",le="10"} 2"#,
            #"stallwatch_stall_duration_seconds_bucket{loop="main",le="+Inf"} 2"#,
            #"stallwatch_stall_duration_seconds_sum{loop="main"} 6.5"#,
            #"stallwatch_stall_duration_seconds_count{loop="main"} 2"#,
            #"stallwatch_stalls_in_progress{loop="main"} 1"#,
            #"stallwatch_capture_pause_seconds_bucket{le="2e-05"} 1"#,
            #"stallwatch_capture_pause_seconds_bucket{le="5e-05"} 2"#,
            #"stallwatch_capture_pause_seconds_count 2"#,
            #"stallwatch_capture_samples_total{result="failed"} 1"#,
            #"stallwatch_late_wakeups_total 1"#,
            #"stallwatch_report_failures_total 1"#,
            #"stallwatch_loop_iterations_total{loop="ma\"in\\x\n"} 0"#,
            #"stallwatch_loop_phase{loop="ma\"in\\x\n",phase="notRunning"} 1"#,
            #"stallwatch_loop_phase{loop="ma\"in\\x\n",phase="beforeSources"} 0"#,
            #"stallwatch_loop_phase_seconds{loop="ma\"in\\x\n"} 0"#,
            "# TYPE stallwatch_stall_duration_seconds histogram",
            "# TYPE stallwatch_stalls_total counter",
        ] {
            #expect(lines.contains(expected), "missing: \(expected)\n\(text)")
        }
        #expect(text.hasSuffix("\n"))
        let idle = StallMetrics(loops: [try EventLoop(name: "main", mainQueue: .disabled)]).exposition()
        print(
            "metrics text: \(idle.utf8.count) bytes for one loop and no stall; \(text.utf8.count) bytes after 3 stalls on 2 loops"
        )
    }

    @Test(.timeLimit(.minutes(3)))
    func aRunningLoopShowsItsPhaseAndIterations() throws {
        let loop = try EventLoop(name: "live", mainQueue: .disabled)
        let metrics = StallMetrics()
        metrics.watch(loop)
        metrics.watch(loop)  // once only
        _ = startLoopThread(loop, name: "metrics-loop")
        defer { loop.stop() }
        let inside = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        loop.perform {
            inside.signal()
            release.wait()
        }
        inside.wait()
        let text = metrics.exposition()
        release.signal()
        #expect(text.contains(#"stallwatch_loop_phase{loop="live",phase="beforeSources"} 1"#), "\(text)")
        #expect(text.components(separatedBy: "stallwatch_loop_phase{").count - 1 == StallMetrics.phases.count)
        let iterations = text.split(separator: "\n").first {
            $0.hasPrefix(#"stallwatch_loop_iterations_total{loop="live"}"#)
        }
        #expect((iterations?.split(separator: " ").last).flatMap { UInt64($0) }.map { $0 >= 1 } == true)
    }

    // MARK: External checkers

    static let promtoolAvailable =
        (try? Fixtures.run("/bin/sh", ["-c", "command -v promtool"], timeout: .seconds(30)).status) == 0
    static let pythonClientAvailable =
        (try? Fixtures.run("/usr/bin/env", ["python3", "-c", "import prometheus_client"], timeout: .seconds(30)).status)
        == 0

    static func writeText(_ text: String) -> String {
        let path = Fixtures.temporaryDirectory("metrics") + "/metrics.txt"
        _ = FileManager.default.createFile(atPath: path, contents: Data(text.utf8))
        return path
    }

    @Test(.timeLimit(.minutes(3)))
    func promtoolAcceptsTheText() throws {
        try #require(
            Self.promtoolAvailable, "promtool is missing (the Debian package prometheus, scripts/bootstrap.sh)")
        let path = Self.writeText(try Self.populated().0.exposition())
        defer { try? FileManager.default.removeItem(atPath: (path as NSString).deletingLastPathComponent) }
        let result = try Fixtures.run("/bin/sh", ["-c", #"promtool check metrics < "$1""#, "sh", path])
        #expect(result.status == 0, "promtool: \(result.stdout)\(result.stderr)")
    }

    @Test(.timeLimit(.minutes(3)))
    func theReferenceParserAcceptsTheTextAndItsHistogramsHoldTheirInvariants() throws {
        try #require(
            Self.pythonClientAvailable,
            "python3 cannot import prometheus_client (the PyPI package prometheus-client, scripts/bootstrap.sh)")
        let (metrics, _) = try Self.populated()
        let path = Self.writeText(metrics.exposition())
        defer { try? FileManager.default.removeItem(atPath: (path as NSString).deletingLastPathComponent) }
        let script = Fixtures.packageRoot.appendingPathComponent("scripts/check-prometheus-text.py").path
        let result = try Fixtures.run("/usr/bin/env", ["python3", script, path])
        #expect(result.status == 0, "parser: \(result.stdout)\(result.stderr)")
        #expect(result.stdout.contains("stallwatch_stall_duration_seconds histogram"), "\(result.stdout)")
        #expect(result.stdout.contains("stallwatch_capture_pause_seconds histogram"))
    }

    // MARK: The endpoint

    /// One HTTP/1.0 request to 127.0.0.1:`port`; returns the whole response.
    static func fetch(port: UInt16, request: String) throws -> String {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var sin = sockaddr_in()
        sin.sin_family = sa_family_t(AF_INET)
        sin.sin_port = port.bigEndian
        sin.sin_addr.s_addr = inet_addr("127.0.0.1")
        let rc = withUnsafePointer(to: &sin) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard rc == 0 else { throw POSIXError(.init(rawValue: errno)!) }
        _ = Array(request.utf8).withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
        var response: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            response += buffer[0..<n]
        }
        return String(decoding: response, as: UTF8.self)
    }

    /// This process's threads named `stallwatch-http…` (the metrics server's acceptor and connection workers), by id.
    static func serverThreads() -> Set<String> {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        return Set(
            tasks.filter {
                ProcFile.text("/proc/self/task/\($0)/comm")?.hasPrefix("stallwatch-http") == true
            })
    }

    @Test(.timeLimit(.minutes(3)))
    func theEndpointServesTheTextOnLoopbackAndStopsCleanly() throws {
        let (metrics, _) = try Self.populated()
        // The server's own threads, by name and id: other tests of this process start and end threads meanwhile.
        let threadsBefore = Self.serverThreads()
        let server = try MetricsHTTPServer(address: "127.0.0.1:0") { metrics.exposition() }
        #expect(server.port != 0)
        #expect(server.url == "http://127.0.0.1:\(server.port)/metrics")
        try server.start()
        let ok = try Self.fetch(port: server.port, request: "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(ok.hasPrefix("HTTP/1.0 200 OK\r\n"))
        #expect(ok.contains("Content-Type: text/plain; version=0.0.4"))
        #expect(ok.contains("# TYPE stallwatch_stalls_total counter"))
        let missing = try Self.fetch(port: server.port, request: "GET / HTTP/1.0\r\n\r\n")
        #expect(missing.hasPrefix("HTTP/1.0 404"))
        let started = Self.serverThreads().subtracting(threadsBefore)
        #expect(!started.isEmpty, "no stallwatch-http thread while serving")
        server.stop()
        // Joined by `stop()`; the kernel drops a joined thread's /proc entry a moment after the join returns.
        #expect(
            pollUntil(timeout: .seconds(5)) { started.isDisjoint(with: Self.serverThreads()) },
            "threads left after stop: \(started.intersection(Self.serverThreads()))")
        #expect(throws: StallWatchError.self) { try server.start() }
        #expect(throws: StallWatchError.self) { try MetricsHTTPServer(address: "nonsense") { "" } }
    }
}
