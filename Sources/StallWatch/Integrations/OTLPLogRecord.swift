// OTLPLogRecord: one stall as an OTLP/HTTP JSON logs request (ExportLogsServiceRequest), a pure encoding.
import Foundation

/// The body of `POST /v1/logs` for one ended stall, in OTLP's JSON encoding (opentelemetry-proto
/// `ExportLogsServiceRequest`: resourceLogs → scopeLogs → logRecords; 64-bit integers as strings).
///
/// Resource attributes: `service.name`, `host.name`, `process.pid`, `process.executable.path`,
/// `process.executable.name`. Record attributes: `stallwatch.report.id`, `stallwatch.report.path`,
/// `stallwatch.cause`, `stallwatch.duration_ms`, `stallwatch.top_frame`, `stallwatch.loop`,
/// `stallwatch.severity`, `stallwatch.status`, `stallwatch.samples`. Severity WARN (13) for a stall, ERROR (17)
/// for a hang or a stall that never ended.
enum OTLPLogRecord {
    /// The request body for `report`, whose file is `reportPath`; `serviceName` defaults to the executable's
    /// file name.
    static func body(for report: StallReport, reportPath: String?, serviceName: String? = nil) -> String {
        let executableName = ApplicationFrame.imageName(report.process.executable)
        let resource = [
            attribute("service.name", string: serviceName ?? executableName),
            attribute("host.name", string: report.process.host),
            attribute("process.pid", int: Int64(report.process.pid)),
            attribute("process.executable.path", string: report.process.executable),
            attribute("process.executable.name", string: executableName),
        ]
        let top = report.applicationFrame?.function ?? "?"
        var attributes = [
            attribute("stallwatch.report.id", string: report.id),
            attribute("stallwatch.cause", string: report.cause?.kind.rawValue ?? "unknown"),
            attribute("stallwatch.duration_ms", double: report.durationMs),
            attribute("stallwatch.top_frame", string: top),
            attribute("stallwatch.loop", string: report.loop.name),
            attribute("stallwatch.severity", string: report.severity.rawValue),
            attribute("stallwatch.status", string: report.status.rawValue),
            attribute("stallwatch.samples", int: Int64(report.samples.count)),
        ]
        if let reportPath { attributes.append(attribute("stallwatch.report.path", string: reportPath)) }
        let serious = report.severity == .hang || report.status == .unrecovered
        let text =
            report.status == .withdrawn
            ? "loop \(report.loop.name) was not stalled: its wait proved to be its idle wait (report withdrawn)"
            : "loop \(report.loop.name) stalled \(Int(report.durationMs)) ms in \(top) "
                + "(\(report.cause?.kind.rawValue ?? "unknown"))"
        let time = nanos(report.startedAt)
        let observed = nanos(report.endedAt ?? Date())
        let record =
            "{\"timeUnixNano\":\"\(time)\",\"observedTimeUnixNano\":\"\(observed)\","
            + "\"severityNumber\":\(serious ? 17 : 13),\"severityText\":\"\(serious ? "ERROR" : "WARN")\","
            + "\"body\":{\"stringValue\":\(JSONLinesEventWriter.quote(text))},"
            + "\"attributes\":[\(attributes.joined(separator: ","))]}"
        return "{\"resourceLogs\":[{\"resource\":{\"attributes\":[\(resource.joined(separator: ","))]},"
            + "\"scopeLogs\":[{\"scope\":{\"name\":\"stallwatch\"},\"logRecords\":[\(record)]}]}]}"
    }

    private static func nanos(_ date: Date) -> UInt64 {
        UInt64(max(0, date.timeIntervalSince1970) * 1e9)
    }

    private static func attribute(_ key: String, string: String) -> String {
        "{\"key\":\"\(key)\",\"value\":{\"stringValue\":\(JSONLinesEventWriter.quote(string))}}"
    }

    private static func attribute(_ key: String, int: Int64) -> String {
        "{\"key\":\"\(key)\",\"value\":{\"intValue\":\"\(int)\"}}"
    }

    private static func attribute(_ key: String, double: Double) -> String {
        "{\"key\":\"\(key)\",\"value\":{\"doubleValue\":\(double.isFinite ? String(double) : "0")}}"
    }
}
