// Prometheus text exposition of stalls, stall durations, capture cost and the watched loops' progress.
import CStallWatchCore
import Foundation
import Synchronization

/// Counts stall events and renders them, with the live state of the watched loops, in Prometheus' text
/// exposition format (version 0.0.4).
///
/// Feed it every event (`Watchdog(loop:configuration:onEvent:)` → ``observe(_:)``), register the loops
/// (``watch(_:)``), and serve ``exposition()`` wherever the service already answers HTTP — or with
/// ``MetricsHTTPServer``. Thread-safe; `observe` takes one short lock and never allocates much.
///
/// | metric | type | labels |
/// |---|---|---|
/// | `stallwatch_stalls_total` | counter | `loop`, `cause`, `severity` (counted when the final report is written; every
/// cause and severity of every known loop from the start, at 0, so `increase()` sees the first stall) |
/// | `stallwatch_stall_duration_seconds` | histogram | `loop` |
/// | `stallwatch_stalls_in_progress` | gauge | `loop` |
/// | `stallwatch_capture_pause_seconds` | histogram | — (loop-thread pause per in-process sample) |
/// | `stallwatch_capture_samples_total` | counter | `result` (`ok`, `failed`) |
/// | `stallwatch_late_wakeups_total`, `stallwatch_report_failures_total` | counter | — |
/// | `stallwatch_loop_iterations_total`, `stallwatch_loop_transitions_total` | counter | `loop` |
/// | `stallwatch_loop_phase` | gauge (1 for the current phase, 0 for the others) | `loop`, `phase` |
/// | `stallwatch_loop_phase_seconds` | gauge (time in the current busy phase; 0 while idle) | `loop` |
///
/// With `labelsByProcess` (the sidecar daemon, watching many processes) the stall series also carry `process`
/// (the executable's file name) and `pid`, so processes are not merged into one series.
public final class StallMetrics: Sendable {
    /// Stall duration buckets (seconds): from a short threshold to a long hang.
    static let defaultDurationBuckets: [Double] = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300]
    /// Loop-thread pause buckets (seconds): the bar is 30 µs median (DESIGN §11).
    static let defaultPauseBuckets: [Double] = [
        0.000005, 0.00001, 0.00002, 0.00003, 0.00005, 0.0001, 0.00025, 0.001, 0.01, 0.1,
    ]

    private struct Counters {
        var stalls: [StallKey: UInt64] = [:]
        var durations: [String: Histogram] = [:]
        var inProgress: [String: Set<String>] = [:]
        var pauses: Histogram
        var samplesOK: UInt64 = 0
        var samplesFailed: UInt64 = 0
        var lateWakeups: UInt64 = 0
        var reportFailures: UInt64 = 0
    }

    private struct StallKey: Hashable, Comparable {
        var loop: String
        var cause: String
        var severity: String
        var process: String = ""
        var pid: String = ""
        static func < (a: StallKey, b: StallKey) -> Bool {
            (a.process, a.pid, a.loop, a.cause, a.severity) < (b.process, b.pid, b.loop, b.cause, b.severity)
        }
        var labels: [String: String] {
            var labels = ["loop": loop, "cause": cause, "severity": severity]
            if !pid.isEmpty {
                labels["process"] = process
                labels["pid"] = pid
            }
            return labels
        }
    }

    /// Loops (and, by process, their processes) whose stall series exist before any stall.
    private let declared = Mutex<Set<StallKey>>([])
    private let labelsByProcess: Bool

    private let counters: Mutex<Counters>
    /// Each watched loop with the name its labels use (``StallWatchConfiguration/name(of:)``, as in reports).
    private let loops = Mutex<[(loop: any WatchedLoop, name: String)]>([])
    private let durationBuckets: [Double]

    /// - Parameters:
    ///   - loops: Loops whose iterations and phase to expose (more with ``watch(_:configuration:)``).
    ///   - configuration: The watchdogs' settings, whose `loopName` names loops without a name of their own
    ///     (so the labels match the reports).
    public convenience init(
        loops: [any WatchedLoop] = [], configuration: StallWatchConfiguration = StallWatchConfiguration()
    ) {
        self.init(loops: loops, configuration: configuration, labelsByProcess: false)
    }

    /// - Parameters:
    ///   - durationBuckets: Upper bounds (seconds, increasing) of the stall duration histogram.
    ///   - pauseBuckets: Upper bounds (seconds, increasing) of the capture pause histogram.
    ///   - labelsByProcess: Label every stall series with its process (`executable`, `pid`), as the daemon does.
    package init(
        loops: [any WatchedLoop] = [], configuration: StallWatchConfiguration = StallWatchConfiguration(),
        durationBuckets: [Double] = StallMetrics.defaultDurationBuckets,
        pauseBuckets: [Double] = StallMetrics.defaultPauseBuckets, labelsByProcess: Bool
    ) {
        self.labelsByProcess = labelsByProcess
        self.durationBuckets = Histogram.normalized(durationBuckets)
        counters = Mutex(Counters(pauses: Histogram(bounds: Histogram.normalized(pauseBuckets))))
        for loop in loops { watch(loop, configuration: configuration) }
    }

    /// Exposes `loop`'s iterations, phase and time in phase (read from its ``LoopState`` at each exposition),
    /// labelled with the name `configuration` gives it (``StallWatchConfiguration/name(of:)``).
    public func watch(_ loop: any WatchedLoop, configuration: StallWatchConfiguration = StallWatchConfiguration()) {
        let name = configuration.name(of: loop)
        loops.withLock { list in
            if !list.contains(where: { $0.loop === loop }) { list.append((loop, name)) }
        }
    }

    /// Makes the stall series of `loop` (in process `pid` running `executable`, used with `labelsByProcess`) exist
    /// at 0 for every cause and severity before its first stall: the sidecar calls this when it starts watching.
    package func declare(loop: String, executable: String = "", pid: Int32 = 0) {
        let key = stallKey(loop: loop, executable: executable, pid: pid)
        declared.withLock { _ = $0.insert(key) }
    }

    private func stallKey(loop: String, executable: String, pid: Int32, cause: String = "", severity: String = "")
        -> StallKey
    {
        guard labelsByProcess else { return StallKey(loop: loop, cause: cause, severity: severity) }
        let name = executable.split(separator: "/").last.map(String.init) ?? executable
        return StallKey(loop: loop, cause: cause, severity: severity, process: name, pid: String(pid))
    }

    /// Counts one stall event. Call it from the watchdog's `onEvent` handler (any thread).
    public func observe(_ event: StallEvent) {
        counters.withLock { c in
            switch event {
            case .began(let report):
                c.inProgress[report.loop.name, default: []].insert(report.id)
            case .escalated:
                break
            case .ended(let report):
                c.inProgress[report.loop.name]?.remove(report.id)
                // Withdrawn: the loop was idle, not stalled.
                guard report.status != .withdrawn else { break }
                let key = stallKey(
                    loop: report.loop.name, executable: report.process.executable, pid: report.process.pid,
                    cause: report.cause?.kind.rawValue ?? "unknown", severity: report.severity.rawValue)
                c.stalls[key, default: 0] += 1
                c.durations[report.loop.name, default: Histogram(bounds: durationBuckets)]
                    .observe(max(0, report.durationMs) / 1000)
            case .sampled(_, _, let pauseMicros):
                if let pauseMicros {
                    c.samplesOK += 1
                    c.pauses.observe(pauseMicros / 1_000_000)
                } else {
                    c.samplesFailed += 1
                }
            case .lateWakeup:
                c.lateWakeups += 1
            case .reportFailed:
                c.reportFailures += 1
            case .heartbeatFailed:
                break  // not a stall figure: the log line and JSON event say it
            }
        }
    }

    /// The metrics in Prometheus' text format (`Content-Type: text/plain; version=0.0.4`), ending in a newline.
    public func exposition() -> String {
        let c = counters.withLock { $0 }
        let watched = loops.withLock { $0 }
        var out = PrometheusText()

        out.family(
            "stallwatch_stalls_total", "counter", "Stalls of a watched loop, counted when the final report is written.")
        var stalls = c.stalls
        // Every known loop's series from the start, at 0: Prometheus' increase() then counts the first stall.
        var known = declared.withLock { $0 }
        for name in watched.map(\.name) where !labelsByProcess {
            known.insert(StallKey(loop: name, cause: "", severity: ""))
        }
        for key in c.stalls.keys {
            known.insert(StallKey(loop: key.loop, cause: "", severity: "", process: key.process, pid: key.pid))
        }
        for base in known {
            for cause in StallReport.Cause.Kind.allCases {
                for severity in StallReport.Severity.allCases {
                    var key = base
                    key.cause = cause.rawValue
                    key.severity = severity.rawValue
                    if stalls[key] == nil { stalls[key] = 0 }
                }
            }
        }
        for (key, count) in stalls.sorted(by: { $0.key < $1.key }) {
            out.sample("stallwatch_stalls_total", key.labels, count)
        }
        out.family("stallwatch_stall_duration_seconds", "histogram", "How long each stall lasted.")
        for (loop, histogram) in c.durations.sorted(by: { $0.key < $1.key }) {
            out.histogram("stallwatch_stall_duration_seconds", ["loop": loop], histogram)
        }
        out.family("stallwatch_stalls_in_progress", "gauge", "Stalls detected and not yet over.")
        for loop in Set(c.inProgress.keys).union(watched.map(\.name)).sorted() {
            out.sample("stallwatch_stalls_in_progress", ["loop": loop], UInt64(c.inProgress[loop]?.count ?? 0))
        }
        out.family(
            "stallwatch_capture_pause_seconds", "histogram",
            "How long the loop thread was paused for each in-process stack sample.")
        out.histogram("stallwatch_capture_pause_seconds", [:], c.pauses)
        out.family("stallwatch_capture_samples_total", "counter", "Stack samples taken during stalls.")
        out.sample("stallwatch_capture_samples_total", ["result": "ok"], c.samplesOK)
        out.sample("stallwatch_capture_samples_total", ["result": "failed"], c.samplesFailed)
        out.family(
            "stallwatch_late_wakeups_total", "counter",
            "Times the watchdog woke late or the machine was suspended, so the loop was not blamed.")
        out.sample("stallwatch_late_wakeups_total", [:], c.lateWakeups)
        out.family("stallwatch_report_failures_total", "counter", "Stall reports that could not be written.")
        out.sample("stallwatch_report_failures_total", [:], c.reportFailures)
        appendLoops(watched, to: &out)
        appendPool(to: &out)
        return out.text
    }

    private func appendLoops(_ watched: [(loop: any WatchedLoop, name: String)], to out: inout PrometheusText) {
        let now = sw_monotonic_coarse_ns()  // phase starts are CLOCK_MONOTONIC_COARSE readings
        let snapshots = watched.map { ($0, $0.loop.state.snapshot()) }
        out.family(
            "stallwatch_loop_iterations_total", "counter", "Loop iterations (pings answered, for a main-queue probe).")
        for (loop, _) in snapshots {
            if let iterations = loop.loop.sampled?.iterations {
                out.sample("stallwatch_loop_iterations_total", ["loop": loop.name], iterations)
            }
        }
        out.family("stallwatch_loop_transitions_total", "counter", "Loop activity transitions published.")
        for (loop, snapshot) in snapshots {
            out.sample("stallwatch_loop_transitions_total", ["loop": loop.name], snapshot.sequence)
        }
        out.family(
            "stallwatch_loop_phase", "gauge", "The loop's current activity: 1 for the current phase, 0 for the others.")
        for (loop, snapshot) in snapshots {
            let current = snapshot.activity.description
            for phase in Self.phases {
                out.sample(
                    "stallwatch_loop_phase", ["loop": loop.name, "phase": phase], UInt64(phase == current ? 1 : 0))
            }
        }
        out.family(
            "stallwatch_loop_phase_seconds", "gauge",
            "Seconds the loop has been in its current busy phase (0 while idle: idle phases are not timestamped).")
        for (loop, snapshot) in snapshots {
            let seconds =
                snapshot.isBusy && now > snapshot.phaseStartNanos ? Double(now - snapshot.phaseStartNanos) / 1e9 : 0
            out.sample("stallwatch_loop_phase_seconds", ["loop": loop.name], seconds)
        }
    }

    static let phases = [
        "notRunning", "entry", "beforeTimers", "beforeSources", "beforeWaiting", "afterWaiting", "exit",
    ]
}

/// A cumulative-on-output histogram: per-bucket counts, sum and count.
struct Histogram: Sendable {
    let bounds: [Double]
    private(set) var counts: [UInt64]
    private(set) var sum: Double = 0
    private(set) var count: UInt64 = 0

    init(bounds: [Double]) {
        self.bounds = bounds
        counts = Array(repeating: 0, count: bounds.count)
    }

    mutating func observe(_ value: Double) {
        count += 1
        sum += value
        if let index = bounds.firstIndex(where: { value <= $0 }) { counts[index] += 1 }
    }

    /// Cumulative counts per bound (`le`), then `+Inf` (= count).
    var cumulative: [UInt64] {
        var running: UInt64 = 0
        return counts.map {
            running += $0; return running
        } + [count]
    }

    /// Sorted, finite, without duplicates.
    static func normalized(_ bounds: [Double]) -> [Double] {
        Array(Set(bounds.filter(\.isFinite))).sorted()
    }
}

/// Builds Prometheus text exposition (format 0.0.4) line by line.
struct PrometheusText {
    private(set) var text = ""

    mutating func family(_ name: String, _ type: String, _ help: String) {
        text += "# HELP \(name) \(Self.escapeHelp(help))\n# TYPE \(name) \(type)\n"
    }

    mutating func sample(_ name: String, _ labels: [String: String], _ value: UInt64) {
        line(name, labels, String(value))
    }

    mutating func sample(_ name: String, _ labels: [String: String], _ value: Double) {
        line(name, labels, Self.format(value))
    }

    mutating func histogram(_ name: String, _ labels: [String: String], _ histogram: Histogram) {
        let cumulative = histogram.cumulative
        for (index, bound) in histogram.bounds.enumerated() {
            line(name + "_bucket", labels, String(cumulative[index]), extra: ("le", Self.format(bound)))
        }
        line(name + "_bucket", labels, String(histogram.count), extra: ("le", "+Inf"))
        line(name + "_sum", labels, Self.format(histogram.sum))
        line(name + "_count", labels, String(histogram.count))
    }

    private mutating func line(
        _ name: String, _ labels: [String: String], _ value: String, extra: (String, String)? = nil
    ) {
        var pairs = labels.sorted { $0.key < $1.key }.map { "\($0.key)=\"\(Self.escapeLabel($0.value))\"" }
        if let extra { pairs.append("\(extra.0)=\"\(extra.1)\"") }
        text += pairs.isEmpty ? "\(name) \(value)\n" : "\(name){\(pairs.joined(separator: ","))} \(value)\n"
    }

    static func format(_ value: Double) -> String {
        if value.isNaN { return "NaN" }
        if value.isInfinite { return value > 0 ? "+Inf" : "-Inf" }
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return "\(value)"
    }

    static func escapeLabel(_ value: String) -> String {
        var out = ""
        for ch in value {
            switch ch {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            default: out.append(ch)
            }
        }
        return out
    }

    static func escapeHelp(_ value: String) -> String {
        value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\n", with: "\\n")
    }
}
