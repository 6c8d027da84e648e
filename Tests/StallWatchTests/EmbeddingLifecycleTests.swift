// Lifecycle of an embedded watchdog (async run, churn without leaks) and its log and JSON-line outputs.
import Dispatch
import Foundation
import StallWatchTestSupport
import Synchronization
import Testing

@testable import StallWatch

#if canImport(Glibc)
    import Glibc
#endif

@Suite(.offPool, .serialized) struct EmbeddingLifecycleTests {
    func configuration(_ directory: String, thresholdMs: Int = 100) -> StallWatchConfiguration {
        var config = StallWatchConfiguration()
        config.thresholdMs = thresholdMs
        config.reportDirectory = directory
        return config
    }

    @Test(.timeLimit(.minutes(3)))
    func asyncRunReturnsOnCancellationAndFinishesTheStallInProgressAsUnrecovered() async throws {
        let directory = Fixtures.temporaryDirectory("run-cancel")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let loop = try EventLoop(name: "service", mainQueue: .disabled)
        let began = DispatchSemaphore(value: 0)
        let finals = Recorder<StallReport.Status>()
        let watchdog = Watchdog(loop: loop, configuration: configuration(directory)) { event in
            switch event {
            case .began: began.signal()
            case .ended(let report): finals.append(report.status)
            default: break
            }
        }
        _ = startLoopThread(loop, name: "service-loop")
        let release = DispatchSemaphore(value: 0)
        // High priority: the tests of the other suites queued on the cooperative pool (most of them block their
        // thread for seconds) must not hold this task back for longer than the wait below.
        let task = Task(priority: .high) { try await watchdog.run() }
        // The watchdog starts inside run(): stall the loop until it is seen.
        loop.perform { release.wait() }
        // Waited for off the cooperative pool: a blocked pool thread would starve the other suites' tasks.
        let seen = await withCheckedContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(returning: began.wait(timeout: .now() + 20)) }
        }
        #expect(seen == .success)
        #expect(!watchdog.isHealthy)
        task.cancel()
        try await task.value
        #expect(!watchdog.isRunning)
        release.signal()
        loop.stop()
        #expect(finals.values == [.unrecovered])
        let reports = try Fixtures.reports(in: directory)
        try #require(reports.count == 1)
        #expect(reports[0].status == .unrecovered)
    }

    @Test(.timeLimit(.minutes(3)))
    func asyncRunOfAnAlreadyCancelledTaskReturnsAtOnce() async throws {
        let directory = Fixtures.temporaryDirectory("run-cancelled")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let watchdog = Watchdog(
            loop: try EventLoop(name: "idle", mainQueue: .disabled), configuration: configuration(directory))
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await watchdog.run()
        }
        try await task.value
        #expect(!watchdog.isRunning)
    }

    /// A thousand rounds of watchdogs, systemd pings and a metrics server, after one that creates what lives for the
    /// process (the sampler, Dispatch's pool threads): the threads and descriptors settle back to what they were.
    /// Exact: run alone, by ``StressTests/LeaksAlone``, where no other test starts threads or opens descriptors.
    func checkAThousandStartsAndStopsWithSystemdPingsAndAMetricsServerLeaveNoThreadsOrDescriptors() throws {
        let directory = Fixtures.temporaryDirectory("churn-embed")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let listener = try DatagramListener(address: "@stallwatch-churn-\(getpid())-\(UUID().uuidString.prefix(8))")
        let loop = try EventLoop(name: "churn", mainQueue: .disabled)
        let probe = MainQueueProbe(
            name: "churn-probe", interval: .milliseconds(1), queue: DispatchQueue(label: "churn"))
        let metrics = StallMetrics(loops: [loop, probe])
        let watchdog = Watchdog(
            loop: loop, configuration: configuration(directory, thresholdMs: 250), onEvent: metrics.observe)
        let probeWatchdog = Watchdog(loop: probe, configuration: configuration(directory, thresholdMs: 250))
        // One warm-up round creates what lives for the process (the sampler, Dispatch's pool threads).
        func round() throws {
            try watchdog.start()
            try probeWatchdog.start()
            probe.start()
            let notifier = try SystemdNotifier(environment: [
                "NOTIFY_SOCKET": listener.address, "WATCHDOG_USEC": "2000", "WATCHDOG_PID": "\(getpid())",
            ])
            try notifier.startWatchdogPings(for: watchdog)
            let server = try MetricsHTTPServer { metrics.exposition() }
            try server.start()
            server.stop()
            notifier.stopWatchdogPings()
            probe.stop()
            probeWatchdog.stop()
            watchdog.stop()
        }
        try round()
        let threadsBefore = WatchdogTests.threadCount()
        let fdsBefore = WatchdogTests.fdCount()
        for _ in 0..<1000 { try round() }
        // A thread may still be on its way out when stop returns, a pool thread idles a while before it ends: the
        // counts are read until they come back.
        #expect(
            WatchdogTests.settles(WatchdogTests.threadCount, within: threadsBefore),
            "threads \(threadsBefore) → \(WatchdogTests.threadCount())")
        #expect(
            WatchdogTests.settles(WatchdogTests.fdCount, within: fdsBefore),
            "fds \(fdsBefore) → \(WatchdogTests.fdCount())")
        let ours = Self.threadNames().filter { $0.hasPrefix("stallwatch-sd") || $0.hasPrefix("stallwatch-http") }
        #expect(ours.count <= 2, "\(ours)")
        #expect(listener.receive(timeout: .seconds(5))?.text == "WATCHDOG=1")
    }

    /// The names of this process's threads.
    static func threadNames() -> [String] {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        return tasks.compactMap {
            ProcFile.text("/proc/self/task/\($0)/comm")?.trimmingCharacters(in: .whitespacesAndNewlines)
        }
    }

    // MARK: Logs and JSON lines

    static func report(status: StallReport.Status, cause: StallReport.Cause.Kind?) -> StallReport {
        var r = ReportSamples.report(id: "20261130T221500.123Z-42-1", status: status)
        r.loop.name = "api \"v2\""
        r.durationMs = 752.31
        r.cause = cause.map { .init(kind: $0, evidence: []) }
        r.samples[0].frames[0].symbol = "Stalls.stallInSleep(durationMs:)"
        return r
    }

    @Test func eventLinesHaveStableKeysAndEscapeStrings() {
        let began = JSONLinesEventWriter.line(for: .began(Self.report(status: .ongoing, cause: nil)))
        #expect(
            began
                == #"{"event":"began","id":"20261130T221500.123Z-42-1","loop":"api \"v2\"","phase":"beforeSources","pid":42,"source":"in-process","thresholdMs":250}"#
        )
        let ended = JSONLinesEventWriter.line(for: .ended(Self.report(status: .ended, cause: .sleep)))
        #expect(
            ended
                == #"{"cause":"sleep","durationMs":752.31,"event":"ended","id":"20261130T221500.123Z-42-1","loop":"api \"v2\"","phase":"beforeSources","pid":42,"samples":1,"severity":"stall","status":"ended","top":"Stalls.stallInSleep(durationMs:)"}"#
        )
        #expect(JSONLinesEventWriter.line(for: .sampled(reportID: "x", index: 0, pauseMicros: 12)) == nil)
        #expect(JSONLinesEventWriter.encode(["k": .string("a\u{1}\n\\")]) == #"{"k":"a\u0001\n\\"}"#)
        // Every line is a JSON object JSONSerialization reads back.
        for line in [began, ended].compactMap({ $0 }) {
            let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
            #expect(object?["event"] != nil)
        }
    }

    @Test func eventLinesAreWrittenWholeToTheirDescriptor() throws {
        var fds: [Int32] = [0, 0]
        try #require(pipe(&fds) == 0)
        defer { close(fds[0]) }
        let writer = JSONLinesEventWriter(fileDescriptor: fds[1])
        writer.write(.began(Self.report(status: .ongoing, cause: nil)))
        writer.write(.sampled(reportID: "x", index: 0, pauseMicros: 1))
        writer.write(.lateWakeup(delayMs: 80))
        close(fds[1])
        var data = [UInt8](repeating: 0, count: 4096)
        var text = ""
        while true {
            let n = read(fds[0], &data, data.count)
            if n <= 0 { break }
            text += String(decoding: data[0..<n], as: UTF8.self)
        }
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.count == 3 && lines[2].isEmpty)
        #expect(lines[1] == #"{"delayMs":80,"event":"lateWakeup"}"#)
    }

    final class CollectingSink: StallLogSink {
        let records = Recorder<(StallLogLevel, String, [String: String])>()
        func log(level: StallLogLevel, message: String, metadata: [String: String]) {
            records.append((level, message, metadata))
        }
    }

    @Test func eventsBecomeLogRecordsWithSwiftLogLevelsAndFlatMetadata() {
        #expect(
            StallLogLevel.allCases.map(\.rawValue) == [
                "trace", "debug", "info", "notice", "warning", "error", "critical",
            ])
        #expect(StallLogLevel.trace < .critical)
        let sink = CollectingSink()
        let logger = StallEventLogger(sink: sink, reportDirectory: "/var/tmp/stallwatch-0")
        logger.log(.began(Self.report(status: .ongoing, cause: nil)))
        logger.log(.sampled(reportID: "x", index: 0, pauseMicros: 12))  // trace: below the default minimum
        logger.log(.ended(Self.report(status: .ended, cause: .sleep)))
        logger.log(.ended(Self.report(status: .unrecovered, cause: nil)))
        let records = sink.records.values
        try? #require(records.count == 3)
        #expect(records[0].0 == .warning)
        #expect(records[0].1 == #"loop 'api "v2"' stalled: stuck in beforeSources for over 250 ms"#)
        #expect(records[0].2["stall_id"] == "20261130T221500.123Z-42-1")
        #expect(records[0].2["report_dir"] == "/var/tmp/stallwatch-0")
        #expect(records[1].0 == .warning)
        #expect(records[1].1.contains("stalled for 752.31 ms in beforeSources (in Stalls.stallInSleep(durationMs:))"))
        #expect(records[1].2["cause"] == "sleep" && records[1].2["duration_ms"] == "752.31")
        #expect(records[2].0 == .error)
        #expect(records[2].2["status"] == "unrecovered")
    }
}
