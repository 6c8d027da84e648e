// Stalls posted as OTLP/HTTP log records, parsed on the receiving side with the official proto definitions.
import Foundation
import StallWatchTestSupport
import Testing

@testable import StallWatch

#if canImport(Glibc)
    import Glibc
#endif

/// Needs PyPI opentelemetry-proto (scripts/bootstrap.sh); each test returns early without it. Checked inside the
/// tests: spawning a process while Swift Testing evaluates traits hangs the runner.
@Suite(.offPool, .serialized) struct OTLPExportTests {
    static func ended(_ id: String, cause: StallReport.Cause.Kind = .lock) -> StallEvent {
        var report = ReportSamples.report(id: id)
        report.cause = StallReport.Cause(kind: cause, evidence: ["futex wait"])
        return .ended(report)
    }

    @Test(.timeLimit(.minutes(3)))
    func eachEndedStallBecomesOneLogRecordWithItsResourceAndAttributes() throws {
        try #require(OTLPReceiver.available, OTLPReceiver.missing)
        let receiver = try OTLPReceiver()
        let exporter = try OTLPLogExporter(endpoint: receiver.endpoint + "/", reportDirectory: "/var/tmp/reports")
        defer { exporter.stop() }
        exporter.observe(.began(ReportSamples.report(id: "began-only")))
        for index in 1...3 { exporter.observe(Self.ended("otlp-\(index)")) }
        #expect(receiver.wait(for: 3), "\(exporter.statistics)")
        let records = receiver.records
        #expect(records.count == 3)
        let ids = records.compactMap { ($0["attributes"] as? [String: Any])?["stallwatch.report.id"] as? String }
        #expect(ids == ["otlp-1", "otlp-2", "otlp-3"])
        let first = try #require(records.first)
        let resource = try #require(first["resource"] as? [String: Any])
        #expect(resource["service.name"] as? String == "demo")
        #expect(resource["host.name"] as? String == "test")
        #expect("\(resource["process.pid"] ?? "")" == "42")
        #expect(resource["process.executable.path"] as? String == "/usr/bin/demo")
        let attributes = try #require(first["attributes"] as? [String: Any])
        #expect(attributes["stallwatch.cause"] as? String == "lock")
        #expect(attributes["stallwatch.duration_ms"] as? Double == 300)
        #expect(attributes["stallwatch.top_frame"] as? String == "demo + 0x1000")
        #expect(attributes["stallwatch.report.path"] as? String == "/var/tmp/reports/stall-otlp-1.json")
        #expect(first["severity"] as? Int == 13)
        #expect(first["scope"] as? String == "stallwatch")
        #expect((first["body"] as? String)?.contains("stalled 300 ms") == true)
        // The third is counted once its answer is read, just after the receiver printed it.
        let deadline = ContinuousClock.now + .seconds(10)
        while exporter.statistics.sent < 3 && ContinuousClock.now < deadline { usleep(10_000) }
        #expect(exporter.statistics.sent == 3)
    }

    @Test(.timeLimit(.minutes(3)))
    func aRefusedPostIsRetriedWithBackoffUntilAccepted() throws {
        try #require(OTLPReceiver.available, OTLPReceiver.missing)
        let receiver = try OTLPReceiver(failFirst: 2)
        let exporter = try OTLPLogExporter(endpoint: receiver.endpoint)
        defer { exporter.stop() }
        let start = ContinuousClock.now
        exporter.observe(Self.ended("retried"))
        #expect(receiver.wait(for: 1))
        let elapsed = ContinuousClock.now - start
        #expect(receiver.records.first?["post"] as? Int == 3, "two 503s, then accepted")
        #expect(elapsed >= .milliseconds(1400), "backoff 0.5 s + 1 s before the third try, took \(elapsed)")
        let deadline = ContinuousClock.now + .seconds(10)
        while exporter.statistics.sent < 1 && ContinuousClock.now < deadline { usleep(10_000) }
        #expect(exporter.statistics.attempts == 3 && exporter.statistics.sent == 1)
    }

    @Test(.timeLimit(.minutes(3)))
    func observingNeverBlocksEvenWhenTheReceiverHangs() throws {
        try #require(OTLPReceiver.available, OTLPReceiver.missing)
        // A socket that listens but never accepts: connections complete, answers never come.
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let listening = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && listen(fd, 16) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        try #require(listening)
        let exporter = try OTLPLogExporter(endpoint: "http://127.0.0.1:\(UInt16(bigEndian: address.sin_port))")
        let start = ContinuousClock.now
        for index in 0..<300 { exporter.observe(Self.ended("hung-\(index)")) }
        let elapsed = ContinuousClock.now - start
        #expect(elapsed < .milliseconds(500), "300 observe calls took \(elapsed)")
        #expect(exporter.statistics.dropped >= 300 - 256 - 1, "the queue is bounded: \(exporter.statistics)")
        exporter.stop()
    }

    @Test(.timeLimit(.minutes(3)))
    func stallwatchRunPostsTheStallOfItsCommand() throws {
        try #require(OTLPReceiver.available, OTLPReceiver.missing)
        let receiver = try OTLPReceiver()
        let directory = Fixtures.temporaryDirectory("otlp-run")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let run = try Fixtures.run(
            Fixtures.executable("stallwatch"),
            [
                "run", "--threshold-ms", "150", "--report-dir", directory, "--otlp", receiver.endpoint, "--",
                Fixtures.executable("stallwatch-demo"), "stall", "--kind", "sleep", "--duration-ms", "500",
                "--delay-ms", "500", "--no-watchdog",
            ])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(receiver.wait(for: 1))
        let attributes = try #require(receiver.records.first?["attributes"] as? [String: Any])
        #expect((attributes["stallwatch.top_frame"] as? String)?.contains("Stalls.sleepFor") == true)
        let path = try #require(attributes["stallwatch.report.path"] as? String)
        #expect(FileManager.default.fileExists(atPath: path), "the record names the report's file: \(path)")
        #expect(attributes["stallwatch.cause"] as? String == "sleep")
    }
}
