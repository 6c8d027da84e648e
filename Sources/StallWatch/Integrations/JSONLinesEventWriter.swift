// One JSON object per stall event on a line (stdout by default), for journald and log shippers.
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Writes stall events as JSON lines: one object per line, keys sorted, one `write(2)` per line (so lines
/// from several threads never interleave on a pipe, up to `PIPE_BUF` bytes).
///
/// The one encoder of event lines: the embedded watchdog's, the demo's and `stallwatch watch`/`run`/`daemon`'s
/// (whose own events, such as `watching`, go through ``encode(_:)`` too).
///
/// Keys (stable; new ones may be added, none renamed):
/// - `began`: `event`, `id`, `pid`, `loop`, `phase`, `source` (the detection source), `thresholdMs`, and
///   `startedBeforeAttach` (1) with `lowerBoundMs` (how long it had lasted at least, at detection) when the stall
///   was under way before watching started
/// - `escalated`: `event`, `id`, `loop`, `severity`
/// - `ended`: `event`, `id`, `pid`, `loop`, `phase`, `status`, `severity`, `durationMs`, `samples`, `top` (the function
///   of ``StallReport/applicationFrame``, `"?"` without frames), `cause` (when classified); `status` `withdrawn`
///   with `withdrawn` (1) when the stall proved to be the loop's idle wait (no stall: the `began` line is taken back)
/// - `lateWakeup`: `event`, `delayMs`; `reportFailed`, `heartbeatFailed`: `event`, `error`
///
/// Samples are not written (they would be one line per 50 ms during a stall).
///
/// ```
/// {"event":"began","id":"20261130T222406.341Z-13530-1","loop":"main","phase":"beforeTimers","thresholdMs":250}
/// ```
public final class JSONLinesEventWriter: Sendable {
    /// A JSON value of a line: flat on purpose, so every line is easy to grep and to index.
    package enum Value: Sendable, Equatable {
        case string(String)
        case int(Int)
        case double(Double)
    }

    private let fd: Int32
    private let lock = Mutex<Void>(())

    /// Writes to standard output.
    public static let standardOutput = JSONLinesEventWriter(fileDescriptor: STDOUT_FILENO)

    /// - Parameter fileDescriptor: Where lines go; not closed by the writer.
    public init(fileDescriptor: Int32) {
        fd = fileDescriptor
    }

    /// Writes the event's line, if it has one. Errors (a closed pipe) are ignored: logging never stops detection.
    public func write(_ event: StallEvent) {
        if let fields = Self.fields(for: event) { write(fields) }
    }

    /// Writes one line of `fields` (``encode(_:)``): for events other than stall events.
    package func write(_ fields: [String: Value]) {
        let bytes = Array((Self.encode(fields) + "\n").utf8)
        lock.withLock { _ in
            var offset = 0
            while offset < bytes.count {
                let n = bytes[offset...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else { return }
                offset += n
            }
        }
    }

    /// The event's fields, or nil for events that are not written (samples).
    package static func fields(for event: StallEvent) -> [String: Value]? {
        switch event {
        case .began(let r):
            return [
                "event": .string("began"), "id": .string(r.id), "pid": .int(Int(r.process.pid)),
                "loop": .string(r.loop.name), "phase": .string(r.loop.phase),
                "source": .string(r.detection.source.rawValue),
                "thresholdMs": .double(r.detection.thresholdMs),
            ].merging(beganBefore(r)) { $1 }
        case .escalated(let r):
            return [
                "event": .string("escalated"), "id": .string(r.id), "loop": .string(r.loop.name),
                "severity": .string(r.severity.rawValue),
            ]
        case .ended(let r):
            var fields: [String: Value] = [
                "event": .string("ended"), "id": .string(r.id), "pid": .int(Int(r.process.pid)),
                "loop": .string(r.loop.name), "phase": .string(r.loop.phase), "status": .string(r.status.rawValue),
                "severity": .string(r.severity.rawValue), "durationMs": .double(r.durationMs),
                "samples": .int(r.samples.count), "top": .string(r.applicationFrame?.function ?? "?"),
            ]
            if let cause = r.cause?.kind.rawValue { fields["cause"] = .string(cause) }
            if r.status == .withdrawn { fields["withdrawn"] = .int(1) }
            return fields.merging(beganBefore(r)) { $1 }
        case .sampled:
            return nil
        case .lateWakeup(let delay):
            return ["event": .string("lateWakeup"), "delayMs": .double(delay)]
        case .reportFailed(let error):
            return ["event": .string("reportFailed"), "error": .string(error.message)]
        case .heartbeatFailed(let error):
            return ["event": .string("heartbeatFailed"), "error": .string(error.message)]
        }
    }

    /// The fields of a stall that began before watching started: its start and duration are bounds.
    private static func beganBefore(_ r: StallReport) -> [String: Value] {
        guard r.startedBeforeAttach == true else { return [:] }
        let atDetection = r.detection.detectedAt.timeIntervalSince(r.startedAt) * 1000
        return ["startedBeforeAttach": .int(1), "lowerBoundMs": .double(max(0, atDetection.rounded()))]
    }

    /// The event's line without the newline, or nil for events that are not written.
    package static func line(for event: StallEvent) -> String? {
        fields(for: event).map(encode)
    }

    /// A flat JSON object with sorted keys: the encoding of every event line, whoever emits it.
    package static func encode(_ fields: [String: Value]) -> String {
        var out = "{"
        for (index, key) in fields.keys.sorted().enumerated() {
            if index > 0 { out += "," }
            out += quote(key) + ":"
            switch fields[key]! {
            case .string(let s): out += quote(s)
            case .int(let i): out += String(i)
            case .double(let d): out += d.isFinite ? StallEventFields.number(d) : "null"
            }
        }
        return out + "}"
    }

    static func quote(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}
