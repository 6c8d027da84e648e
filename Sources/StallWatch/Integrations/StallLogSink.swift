// Stall events as log records, through a sink in swift-log's shape that a service bridges to its logger.

/// Log levels with swift-log's names and order (`Logger.Level`), so a bridge maps them one to one.
public enum StallLogLevel: String, Sendable, CaseIterable, Comparable {
    case trace, debug, info, notice, warning, error, critical

    public static func < (a: StallLogLevel, b: StallLogLevel) -> Bool {
        allCases.firstIndex(of: a)! < allCases.firstIndex(of: b)!
    }
}

/// Where StallWatch's log records go: one call per record, with swift-log's level names and a flat metadata
/// dictionary (swift-log's `Logger.Metadata` holds `.string` values of the same keys).
///
/// A bridge to swift-log is three lines (see `docs/embedding.md`):
/// ```swift
/// struct SwiftLogSink: StallLogSink {
///     let logger: Logger
///     func log(level: StallLogLevel, message: String, metadata: [String: String]) {
///         logger.log(level: Logger.Level(rawValue: level.rawValue)!, "\(message)",
///                    metadata: metadata.mapValues { .string($0) })
///     }
/// }
/// ```
public protocol StallLogSink: Sendable {
    /// Called on the watchdog thread: hand the record off quickly.
    func log(level: StallLogLevel, message: String, metadata: [String: String])
}

/// Turns ``StallEvent``s into log records for a ``StallLogSink``.
///
/// Levels: a stall's beginning and end `warning` (a hang `error`; a stall the watchdog stopped during
/// `error`), a sample `trace`, a late wake-up `notice`, a report that could not be written `error`.
/// Metadata keys are stable: `stall_id`, `loop`, `phase`, `threshold_ms`, `status`, `severity`, `duration_ms`,
/// `cause`, `top_frame` (the function of ``StallReport/applicationFrame``), `samples`, `report_dir` (when known),
/// `error`.
public struct StallEventLogger: Sendable {
    let sink: any StallLogSink
    /// Records below this level are not passed to the sink.
    var minimumLevel: StallLogLevel
    /// Added to every record's metadata as `report_dir` (for example ``Watchdog/reportDirectory``).
    var reportDirectory: String?

    public init(sink: any StallLogSink, minimumLevel: StallLogLevel = .debug, reportDirectory: String? = nil) {
        self.sink = sink
        self.minimumLevel = minimumLevel
        self.reportDirectory = reportDirectory
    }

    /// Logs one event. Use it as (or from) the watchdog's `onEvent` handler.
    public func log(_ event: StallEvent) {
        guard var record = Self.record(for: event), record.level >= minimumLevel else { return }
        if let reportDirectory, record.metadata["stall_id"] != nil { record.metadata["report_dir"] = reportDirectory }
        sink.log(level: record.level, message: record.message, metadata: record.metadata)
    }

    /// The record an event becomes: level, message, metadata.
    static func record(for event: StallEvent) -> (
        level: StallLogLevel, message: String, metadata: [String: String]
    )? {
        switch event {
        case .began(let r):
            return (
                .warning,
                "loop '\(r.loop.name)' stalled: stuck in \(r.loop.phase) for over \(StallEventFields.number(r.detection.thresholdMs)) ms",
                [
                    "stall_id": r.id, "loop": r.loop.name, "phase": r.loop.phase,
                    "threshold_ms": StallEventFields.number(r.detection.thresholdMs),
                ]
            )
        case .escalated(let r):
            return (
                .error,
                "loop '\(r.loop.name)' hangs: stuck in \(r.loop.phase) for over \(StallEventFields.number(r.detection.hangThresholdMs)) ms",
                ["stall_id": r.id, "loop": r.loop.name, "phase": r.loop.phase, "severity": r.severity.rawValue]
            )
        case .ended(let r):
            var metadata = [
                "stall_id": r.id, "loop": r.loop.name, "phase": r.loop.phase, "status": r.status.rawValue,
                "severity": r.severity.rawValue, "duration_ms": StallEventFields.number(r.durationMs),
                "samples": String(r.samples.count),
            ]
            if let cause = r.cause?.kind.rawValue { metadata["cause"] = cause }
            if let top = r.applicationFrame?.function { metadata["top_frame"] = top }
            let duration = StallEventFields.number(r.durationMs)
            if r.status == .withdrawn {
                let text = "loop '\(r.loop.name)' was not stalled after all: it came back to its wait after work (idle)"
                return (.notice, text, metadata)
            }
            let message =
                r.status == .unrecovered
                ? "loop '\(r.loop.name)' was still stuck in \(r.loop.phase) after \(duration) ms when the watchdog stopped"
                : "loop '\(r.loop.name)' was stalled for \(duration) ms in \(r.loop.phase)"
                    + (metadata["top_frame"].map { " (in \($0))" } ?? "")
            let level: StallLogLevel = r.status == .unrecovered || r.severity == .hang ? .error : .warning
            return (level, message, metadata)
        case .sampled(let id, let index, let pause):
            var metadata = ["stall_id": id, "sample": String(index)]
            if let pause { metadata["pause_us"] = StallEventFields.number(pause) }
            return (.trace, pause == nil ? "stack sample \(index) failed" : "stack sample \(index) taken", metadata)
        case .lateWakeup(let delay):
            return (
                .notice, "the watchdog woke \(StallEventFields.number(delay)) ms late; the loop was not blamed",
                ["delay_ms": StallEventFields.number(delay)]
            )
        case .reportFailed(let error):
            return (.error, "a stall report could not be written: \(error.message)", ["error": error.message])
        case .heartbeatFailed(let error):
            return (.error, "the heartbeat could not be published: \(error.message)", ["error": error.message])
        }
    }
}

/// Shared formatting of event fields for logs and JSON lines.
enum StallEventFields {
    /// `250` for whole numbers, `752.31` otherwise.
    static func number(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : "\(value)"
    }
}
