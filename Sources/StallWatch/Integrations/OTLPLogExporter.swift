// OTLPLogExporter: each ended stall posted as an OTLP/HTTP log record, from its own thread, retried with backoff.
import Dispatch
import Synchronization

/// Sends every ended stall to an OpenTelemetry collector as one log record (`POST <endpoint>/v1/logs`, JSON
/// encoding, see ``OTLPLogRecord``), so stalls from a fleet reach any backend the collector feeds.
///
/// ``observe(_:)`` never blocks the caller (the watchdog's event handler): it queues the record (at most 256;
/// beyond that the oldest is dropped and counted) and a named thread (`stallwatch-otlp`) posts it. A failed post
/// (no answer, 429, 5xx) is retried after 0.5, 1, 2 and 4 s, then dropped; other 4xx answers are dropped at once.
///
/// ```swift
/// let otlp = try OTLPLogExporter(endpoint: "http://127.0.0.1:4318", reportDirectory: config.reportDirectoryPath)
/// let watchdog = Watchdog(loop: loop, configuration: config) { event in otlp.observe(event) }
/// ```
package final class OTLPLogExporter: Sendable {
    package let endpoint: String
    private let client: OTLPHTTPClient
    private let reportDirectory: String?
    private let serviceName: String?
    private let queue = Mutex<(bodies: [String], stopping: Bool)>(([], false))
    private let available = DispatchSemaphore(value: 0)
    /// Signalled once by stop(), to cut a backoff sleep short.
    private let stopped = DispatchSemaphore(value: 0)
    private let thread = Mutex<NamedThread?>(nil)
    private let counters = Mutex<(sent: Int, dropped: Int, attempts: Int)>((0, 0, 0))
    private static let queueLimit = 256
    /// Waits before each retry.
    static let backoff: [Duration] = [.milliseconds(500), .seconds(1), .seconds(2), .seconds(4)]

    /// - Parameters:
    ///   - endpoint: `http://host[:port][/base]` of an OTLP/HTTP receiver (a collector's port 4318).
    ///   - reportDirectory: where reports are written, for each record's `stallwatch.report.path`.
    ///   - serviceName: the `service.name` resource attribute (default: the executable's file name).
    /// - Throws: `.invalidConfiguration` for an endpoint that is not `http://…`; `.systemCall` if the thread
    ///   cannot start.
    package init(endpoint: String, reportDirectory: String? = nil, serviceName: String? = nil) throws(StallWatchError) {
        guard let client = OTLPHTTPClient(endpoint: endpoint) else {
            throw StallWatchError(
                .invalidConfiguration, "--otlp \(endpoint): expected http://HOST[:PORT][/PATH]",
                context: ["endpoint": endpoint])
        }
        self.endpoint = endpoint
        self.client = client
        self.reportDirectory = reportDirectory
        self.serviceName = serviceName
        let started = try NamedThread(name: "stallwatch-otlp") { [self] in send() }
        thread.withLock { $0 = started }
    }

    deinit { stop() }

    /// Queues a record for an ended stall; other events are ignored. Never blocks. Any thread.
    package func observe(_ event: StallEvent) {
        guard case .ended(let report) = event else { return }
        let path = reportDirectory.map { ReportWriter.path(ofReportID: report.id, in: $0) }
        let body = OTLPLogRecord.body(for: report, reportPath: path, serviceName: serviceName)
        let dropped = queue.withLock { queue -> Bool in
            guard !queue.stopping else { return true }
            queue.bodies.append(body)
            if queue.bodies.count > Self.queueLimit {
                queue.bodies.removeFirst()
                return true
            }
            return false
        }
        if dropped { counters.withLock { $0.dropped += 1 } }
        available.signal()
    }

    /// Records posted and acknowledged, dropped (queue full, refused, retries exhausted), and posts tried.
    package var statistics: (sent: Int, dropped: Int, attempts: Int) { counters.withLock { $0 } }

    /// Stops the thread (a post in flight finishes or times out; queued records are dropped) and joins it.
    package func stop() {
        let first = queue.withLock { queue -> Bool in
            defer { queue.stopping = true }
            return !queue.stopping
        }
        if first {
            available.signal()
            stopped.signal()
        }
        let running = thread.withLock { thread -> NamedThread? in
            defer { thread = nil }
            return thread
        }
        running?.join()
    }

    private var stopping: Bool { queue.withLock { $0.stopping } }

    private func send() {
        while true {
            available.wait()
            if stopping { return }
            guard let body = queue.withLock({ $0.bodies.isEmpty ? nil : $0.bodies.removeFirst() }) else { continue }
            var delivered = false
            for attempt in 0...Self.backoff.count {
                if attempt > 0 {
                    // Sleep the backoff unless stopped.
                    let nanos = Int(clamping: Self.backoff[attempt - 1].nanoseconds)
                    if stopped.wait(timeout: .now() + .nanoseconds(nanos)) == .success { return }
                }
                counters.withLock { $0.attempts += 1 }
                let status = client.post(body)
                if let status, (200..<300).contains(status) {
                    delivered = true
                    break
                }
                if let status, (400..<500).contains(status), status != 429 { break }  // will never be accepted
            }
            counters.withLock { delivered ? ($0.sent += 1) : ($0.dropped += 1) }
        }
    }
}
