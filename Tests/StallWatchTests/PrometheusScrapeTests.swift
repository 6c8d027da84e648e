// The metrics endpoint scraped by the real Prometheus server on loopback, checked through its HTTP API; and
// scrapes answered while idle connections sit open.
import Foundation
import StallWatchTestSupport
import Testing

@testable import StallWatch

#if canImport(Glibc)
    import Glibc
#endif

/// A Prometheus server with a temporary configuration and storage, scraping one target every second; killed on
/// teardown.
final class PrometheusServer {
    let process = Process()
    let port: Int
    let directory: String

    static var available: Bool { FileManager.default.isExecutableFile(atPath: "/usr/bin/prometheus") }

    init(target: String) throws {
        directory = Fixtures.temporaryDirectory("prometheus")
        port = try PrometheusServer.freePort()
        let config = """
            global:
              scrape_interval: 1s
              scrape_timeout: 900ms
            scrape_configs:
              - job_name: stallwatch
                static_configs:
                  - targets: ["\(target)"]
            """
        try config.write(toFile: directory + "/prometheus.yml", atomically: true, encoding: .utf8)
        process.executableURL = URL(fileURLWithPath: "/usr/bin/prometheus")
        process.arguments = [
            "--config.file=\(directory)/prometheus.yml", "--storage.tsdb.path=\(directory)/data",
            "--web.listen-address=127.0.0.1:\(port)",
        ]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// A port the kernel just handed out on 127.0.0.1.
    static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(fd, pointer, length) == 0 && getsockname(fd, pointer, &length) == 0
            }
        }
        try #require(bound)
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// `/api/v1/query?query=…`: each result's labels and value; empty until the server answers.
    func query(_ promql: String) -> [(labels: [String: String], value: String)] {
        let url = "http://127.0.0.1:\(port)/api/v1/query"
        guard
            let result = try? Fixtures.run(
                "/usr/bin/curl", ["-s", "--max-time", "5", "--data-urlencode", "query=\(promql)", url],
                timeout: .seconds(10)),
            let json = try? JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any],
            let data = json["data"] as? [String: Any], let results = data["result"] as? [[String: Any]]
        else { return [] }
        return results.compactMap { entry in
            guard let labels = entry["metric"] as? [String: String], let value = entry["value"] as? [Any],
                value.count == 2, let text = value[1] as? String
            else { return nil }
            return (labels, text)
        }
    }

    /// Polls `promql` (the server scrapes once a second) until `condition` holds; false after `timeout`.
    func wait(
        for promql: String, timeout: Duration = .seconds(60),
        until condition: ([(labels: [String: String], value: String)]) -> Bool
    ) -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if condition(query(promql)) { return true }
            usleep(250_000)
        }
        return false
    }
}

@Suite(.offPool, .serialized) struct PrometheusScrapeTests {
    @Test(.timeLimit(.minutes(2)))
    func theRealServerSeesEveryStallSeriesAtZeroBeforeTheFirstStallAndThenItsCount() throws {
        try #require(
            PrometheusServer.available,
            "/usr/bin/prometheus is missing (the Debian package prometheus, scripts/bootstrap.sh)")
        let loop = try EventLoop(name: "scraped", mainQueue: .disabled)
        let metrics = StallMetrics(loops: [loop])
        let server = try MetricsHTTPServer(address: "127.0.0.1:0") { metrics.exposition() }
        try server.start()
        defer { server.stop() }
        let prometheus = try PrometheusServer(target: "127.0.0.1:\(server.port)")

        let causes = StallReport.Cause.Kind.allCases.count * StallReport.Severity.allCases.count
        #expect(
            prometheus.wait(for: "stallwatch_stalls_total{loop=\"scraped\"}") { results in
                results.count == causes && results.allSatisfy { $0.value == "0" }
            }, "every cause and severity at 0 before any stall: \(prometheus.query("stallwatch_stalls_total"))")
        #expect(prometheus.query("up{job=\"stallwatch\"}").first?.value == "1")

        var report = ReportSamples.report(id: "scraped-1")
        report.loop.name = "scraped"
        report.cause = StallReport.Cause(kind: .lock, evidence: ["futex wait"])
        metrics.observe(.ended(report))
        let one = "stallwatch_stalls_total{loop=\"scraped\",cause=\"lock\",severity=\"stall\"}"
        #expect(prometheus.wait(for: one) { $0.first?.value == "1" }, "\(prometheus.query(one))")
        #expect(
            prometheus.wait(for: "stallwatch_stall_duration_seconds_count{loop=\"scraped\"}") {
                $0.first?.value == "1"
            })
    }

    @Test(.timeLimit(.minutes(3)))
    func aScrapeIsAnsweredAtOnceWhileFiveIdleConnectionsAreOpen() throws {
        let metrics = StallMetrics()
        let server = try MetricsHTTPServer(address: "127.0.0.1:0") { metrics.exposition() }
        try server.start()
        defer { server.stop() }
        var idle: [Int32] = []
        defer { for fd in idle { close(fd) } }
        for _ in 0..<5 { idle.append(try Self.connect(port: Int(server.port))) }
        let start = ContinuousClock.now
        let result = try Fixtures.run(
            "/usr/bin/curl", ["-s", "--max-time", "10", "http://127.0.0.1:\(server.port)/metrics"],
            timeout: .seconds(20))
        let elapsed = ContinuousClock.now - start
        #expect(result.stdout.contains("# TYPE stallwatch_stalls_total counter"))
        #expect(elapsed < .seconds(1), "the scrape took \(elapsed) behind 5 idle connections")
    }

    @Test func theDaemonLabelsStallsByProcessAndDeclaredLoopsStartAtZero() {
        let metrics = StallMetrics(labelsByProcess: true)
        metrics.declare(loop: "main", executable: "/usr/bin/api", pid: 7)
        var report = ReportSamples.report(id: "p-1")
        report.process.pid = 8
        report.process.executable = "/usr/bin/worker"
        metrics.observe(.ended(report))
        let text = metrics.exposition()
        #expect(
            text.contains(
                "stallwatch_stalls_total{cause=\"cpu\",loop=\"main\",pid=\"7\",process=\"api\",severity=\"stall\"} 0"))
        #expect(
            text.contains(
                "stallwatch_stalls_total{cause=\"unknown\",loop=\"main\",pid=\"8\",process=\"worker\",severity=\"stall\"} 1"
            ))
        #expect(
            text.contains(
                "stallwatch_stalls_total{cause=\"lock\",loop=\"main\",pid=\"8\",process=\"worker\",severity=\"hang\"} 0"
            ))
    }

    static func connect(port: Int) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        try #require(connected == 0)
        return fd
    }
}
