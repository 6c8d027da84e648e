// EventOutput: watch/run/daemon event lines, readable on a terminal and JSON for log shippers.
import StallWatch

/// Where and how `watch`, `run` and `daemon` print their events: one JSON line each (``JSONLinesEventWriter``)
/// with `--json` or when the stream is not a terminal; otherwise a sentence a person reads, naming the report's
/// file.
struct EventOutput {
    var console: Console
    /// `run` prints on standard error: standard output is the command's.
    var toError = false
    /// `--json`: JSON lines even on a terminal.
    var json = false
    /// The directory reports are written to, for the path of an ended stall's report.
    var reportDirectory: String

    init(console: Console, toError: Bool = false, arguments: Arguments, reportDirectory: String) {
        self.console = console
        self.toError = toError
        self.json = arguments.has("--json")
        self.reportDirectory = reportDirectory
    }

    /// Whether lines are JSON: asked for, or the stream is not a terminal.
    var writesJSON: Bool { json || !(toError ? console.errorOutputIsTerminal : console.outputIsTerminal) }

    /// Prints the event; nothing for events without a line (samples).
    func emit(_ fields: [String: JSONLinesEventWriter.Value]?) {
        guard let fields else { return }
        let line =
            writesJSON ? JSONLinesEventWriter.encode(fields) : Self.text(fields, reportDirectory: reportDirectory)
        if toError { console.printError(line) } else { console.print(line) }
    }

    /// `752.9`, `250`: one decimal at most.
    static func number(_ value: Double) -> String {
        guard value.isFinite else { return "?" }
        let tenths = (value * 10).rounded()
        return tenths.truncatingRemainder(dividingBy: 10) == 0 ? String(Int(tenths / 10)) : String(tenths / 10)
    }

    /// The sentence for an event's fields:
    /// `stall ended: loop main (pid 42) 752.9 ms in static Stalls.sleepFor(milliseconds:) [sleep], 11 samples; report /var/tmp/…/stall-….json`.
    static func text(_ fields: [String: JSONLinesEventWriter.Value], reportDirectory: String) -> String {
        func value(_ key: String) -> String? {
            switch fields[key] {
            case .string(let text): text
            case .int(let number): String(number)
            case .double(let number): Self.number(number)
            case nil: nil
            }
        }
        let event = value("event") ?? "event"
        let loop = value("loop").map { "loop \($0)" } ?? "loop"
        let pid = value("pid").map { " (pid \($0))" } ?? ""
        switch event {
        case "began":
            return
                "stall began: \(loop)\(pid) stuck in \(value("phase") ?? "?") for over "
                + (value("lowerBoundMs").map { "\($0) ms, begun before watching started" }
                    ?? "\(value("thresholdMs") ?? "?") ms")
        case "escalated":
            return "stall escalated: \(loop) is now a \(value("severity") ?? "hang")"
        case "ended" where value("withdrawn") != nil:
            var text =
                "stall withdrawn: \(loop)\(pid) was in its idle wait, not stuck: it came back to that wait after work"
            if let id = value("id") {
                text += "; report \(ReportWriter.path(ofReportID: id, in: reportDirectory))"
            }
            return text
        case "ended":
            let atLeast = value("startedBeforeAttach") == nil ? "" : "at least "
            var text = "stall ended: \(loop)\(pid) \(atLeast)\(value("durationMs") ?? "?") ms in \(value("top") ?? "?")"
            if let cause = value("cause") { text += " [\(cause)]" }
            text += ", \(value("samples") ?? "0") samples"
            if let id = value("id") {
                text += "; report \(ReportWriter.path(ofReportID: id, in: reportDirectory))"
            }
            return text
        case "watching":
            return
                "watching pid \(value("pid") ?? "?") thread \(value("threadId") ?? "?") by \(value("source") ?? "?"), "
                + "threshold \(value("thresholdMs") ?? "?") ms"
        case "lockWaitTakenAsIdle":
            let pid = value("pid") ?? "?", tid = value("threadId") ?? "?"
            let blocked = value("blockedForAtLeastMs").map { " for at least \($0) ms" } ?? ""
            return
                "pid \(pid) thread \(tid) was asleep in \(value("call") ?? "?")\(blocked) when watching began: a lock "
                + "wait that records no owner, taken as its idle wait (a queue or condition wait looks the same) and not "
                + "judged stuck; if the loop is stuck, `stallwatch dump -p \(pid) --tid \(tid)` shows candidate holders, "
                + "and a service started with `stallwatch run --lock-book` records who took its semaphores"
        case "threadDropped":
            return
                "stopped watching pid \(value("pid") ?? "?") thread \(value("threadId") ?? "?"): \(value("reason") ?? "?")"
        case "metrics":
            return "metrics on http://\(value("address") ?? "?")\(value("path") ?? "/metrics")"
        default:
            let rest = fields.keys.filter { $0 != "event" }.sorted().compactMap { key in
                value(key).map { "\(key)=\($0)" }
            }
            return ([event] + rest).joined(separator: " ")
        }
    }
}
