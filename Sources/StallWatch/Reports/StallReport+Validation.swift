// Validation on decode: the ranges, dates and sizes a report may hold, checked in one place for every reader.
import Foundation

extension StallWatchError {
    /// A report field whose value no StallWatch writer produces and no reader may trust (code `.report`): the
    /// dotted path of the field, the value as text (shortened, control characters escaped, so it is safe to print)
    /// and the rule it breaks, in `context` (`field`, `value`, `rule`) and in the message
    /// (`durationMs = -1: not a finite number in 0…1e+11`).
    init(field: String, value: String, rule: String) {
        self.init(
            .report, "\(field) = \(value): not \(rule)", context: ["field": field, "value": value, "rule": rule])
    }

    /// Whether this is a report field's invalid value (``init(field:value:rule:)``).
    var isInvalidReportField: Bool { code == .report && context["rule"] != nil }
}

extension StallReport {
    /// The bounds a decoded report must respect. Generous against anything a watchdog can measure, tight
    /// enough that every arithmetic or conversion the inspector and exporters do on them cannot trap.
    enum Limits {
        /// Durations, offsets and thresholds, milliseconds: about three years.
        static let maximumMilliseconds = 1e11
        /// Pause, unwind and symbolication costs, microseconds.
        static let maximumMicroseconds = 1e14
        /// Dates from 1970 up to 2200-01-01 (well inside `Int64` nanoseconds since 1970).
        static let dates = Date(timeIntervalSince1970: 0)...Date(timeIntervalSince1970: 7_258_118_400)
        /// Counts (samples, occurrences, tree counts).
        static let maximumCount = 1 << 40
        /// Any one string, in UTF-8 bytes.
        static let maximumStringBytes = 1 << 20
        /// Report ids (they name files).
        static let maximumIDBytes = 256
    }

    /// Checks every numeric, date and string field against ``Limits``; the decoder calls this, so a report
    /// that decoded is safe to format, export and do arithmetic on. A v2 reader calls it on what it built.
    /// - Throws: the first invalid field met, as `StallWatchError` `.report` naming the field, value and rule.
    func validate() throws(StallWatchError) {
        var check = ReportValidator()
        try check.run(self)
    }
}

/// Walks a report; one function per rule kind, each naming the field it checks.
struct ReportValidator {
    typealias Failure = StallWatchError
    private typealias Limits = StallReport.Limits

    mutating func run(_ report: StallReport) throws(Failure) {
        try string("id", report.id, maximum: Limits.maximumIDBytes, empty: false)
        if report.id.contains("/") { throw Failure(field: "id", value: Self.shown(report.id), rule: "free of \"/\"") }
        try date("startedAt", report.startedAt)
        if let endedAt = report.endedAt { try date("endedAt", endedAt) }
        try milliseconds("durationMs", report.durationMs, signed: false)
        try detection(report.detection)
        try string("process.executable", report.process.executable)
        try string("process.host", report.process.host)
        if let buildID = report.process.buildId { try string("process.buildId", buildID) }
        try string("loop.name", report.loop.name)
        try string("loop.phase", report.loop.phase)
        for (index, sample) in report.samples.enumerated() { try self.sample("samples[\(index)]", sample) }
        for (index, image) in report.images.enumerated() { try string("images[\(index)].path", image.path) }
        try string("signature", report.signature)
        try capture(report.capture)
        for (index, note) in report.notes.enumerated() { try string("notes[\(index)]", note) }
        for (key, value) in report.annotations {
            try string("annotations key", key)
            try string("annotations[\"\(Self.shown(key))\"]", value)
        }
        if let cause = report.cause {
            for (index, line) in cause.evidence.enumerated() { try string("cause.evidence[\(index)]", line) }
        }
        for (index, node) in (report.callTree ?? []).enumerated() { try self.node("callTree[\(index)]", node) }
        if let point = report.pointStack {
            try count("pointStack.count", point.count)
            try frames("pointStack.frames", point.frames)
        }
        for (index, thread) in (report.threads ?? []).enumerated() {
            let field = "threads[\(index)]"
            try string(field + ".name", thread.name)
            try string(field + ".state", thread.state)
            try frames(field + ".frames", thread.frames)
        }
        if let context = report.context { try self.context(context) }
        if let occurrences = report.occurrences, !(1...Limits.maximumCount).contains(occurrences) {
            throw Failure(field: "occurrences", value: String(occurrences), rule: "in 1…\(Limits.maximumCount)")
        }
        if let firstSeen = report.firstSeen { try date("firstSeen", firstSeen) }
        if let lastSeen = report.lastSeen { try date("lastSeen", lastSeen) }
        if let longest = report.maxDurationMs { try milliseconds("maxDurationMs", longest, signed: false) }
        if let leadUp = report.leadUp { try self.leadUp(leadUp) }
        if let hung = report.hungAwait { try hungAwait(hung) }
        if let reason = report.snapshotReason { try string("snapshotReason", reason) }
        if let task = report.task, let name = task.name { try string("task.name", name) }
        if let total = report.totalDurationMs {
            // A sum of up to `maximumCount` durations: bounded, and still far from overflowing anything.
            guard total.isFinite, total >= 0, total <= Limits.maximumMilliseconds * Double(Limits.maximumCount) else {
                throw Failure(field: "totalDurationMs", value: "\(total)", rule: "a finite number ≥ 0")
            }
        }
    }

    private func detection(_ detection: StallReport.Detection) throws(Failure) {
        try string("detection.source", detection.source.rawValue)
        try milliseconds("detection.thresholdMs", detection.thresholdMs, signed: false)
        try milliseconds("detection.hangThresholdMs", detection.hangThresholdMs, signed: false)
        try date("detection.detectedAt", detection.detectedAt)
        try milliseconds("detection.latencyMs", detection.latencyMs, signed: true)
    }

    private func capture(_ capture: StallReport.CaptureSummary) throws(Failure) {
        try string("capture.method", capture.method.rawValue)
        try milliseconds("capture.sampleIntervalMs", capture.sampleIntervalMs, signed: false)
        try count("capture.samplesTaken", capture.samplesTaken)
        try count("capture.samplesFailed", capture.samplesFailed)
        let costs = [
            ("pauseMicrosMedian", capture.pauseMicrosMedian), ("pauseMicrosMax", capture.pauseMicrosMax),
            ("unwindMicrosMedian", capture.unwindMicrosMedian), ("symbolicationMicros", capture.symbolicationMicros),
        ]
        for case (let name, let value?) in costs { try micros("capture." + name, value) }
        for (index, line) in capture.errors.enumerated() { try string("capture.errors[\(index)]", line) }
    }

    private func sample(_ field: String, _ sample: StallReport.Sample) throws(Failure) {
        try milliseconds(field + ".offsetMs", sample.offsetMs, signed: true)
        try frames(field + ".frames", sample.frames)
        if let pause = sample.pauseMicros { try micros(field + ".pauseMicros", pause) }
        if let error = sample.error { try string(field + ".error", error) }
        if let thread = sample.thread {
            try string(field + ".thread.state", thread.state)
            try milliseconds(field + ".thread.cpuTimeMs", thread.cpuTimeMs, signed: false)
            try milliseconds(field + ".thread.runQueueWaitMs", thread.runQueueWaitMs, signed: false)
        }
    }

    func frames(_ field: String, _ frames: [StackFrame]) throws(Failure) {
        for (index, frame) in frames.enumerated() {
            let name = "\(field)[\(index)]"
            if let symbol = frame.symbol { try string(name + ".symbol", symbol) }
            if let image = frame.image { try string(name + ".image", image) }
            if let file = frame.file { try string(name + ".file", file) }
            if let offset = frame.symbolOffset { try count(name + ".symbolOffset", offset) }
            if let line = frame.line, !(0...Int(Int32.max)).contains(line) {
                throw Failure(field: name + ".line", value: String(line), rule: "in 0…\(Int32.max)")
            }
        }
    }

    private func node(_ field: String, _ node: CallTree.Node, depth: Int = 0) throws(Failure) {
        guard depth < 1024 else { throw Failure(field: field, value: "depth \(depth)", rule: "at most 1024 deep") }
        try count(field + ".count", node.count)
        try count(field + ".selfCount", node.selfCount)
        try frames(field + ".frame", [node.frame])
        for (index, child) in node.children.enumerated() {
            try self.node("\(field).children[\(index)]", child, depth: depth + 1)
        }
    }

    private func context(_ context: StallReport.SystemContext) throws(Failure) {
        let values = [
            ("processCpuPercent", context.processCpuPercent), ("loopCpuPercent", context.loopCpuPercent),
            ("cgroupThrottledMs", context.cgroupThrottledMs), ("stealPercent", context.stealPercent),
            ("diskBusyPercent", context.diskBusyPercent), ("diskMiB", context.diskMiB),
            ("processDiskMiB", context.processDiskMiB),
        ]
        for case (let name, let value?) in values {
            try milliseconds("context." + name, value, signed: false)
        }
        for (index, load) in (context.loadAverage ?? []).enumerated() {
            try milliseconds("context.loadAverage[\(index)]", load, signed: false)
        }
        if let cpus = context.cpuCount { try count("context.cpuCount", cpus) }
    }

    // MARK: - Rules

    func milliseconds(_ field: String, _ value: Double, signed: Bool) throws(Failure) {
        let limit = Limits.maximumMilliseconds
        guard value.isFinite, value <= limit, value >= (signed ? -limit : 0) else {
            throw Failure(field: field, value: "\(value)", rule: "a finite number in \(signed ? "-" : "0…")\(limit)")
        }
    }

    func micros(_ field: String, _ value: Double) throws(Failure) {
        guard value.isFinite, value >= 0, value <= Limits.maximumMicroseconds else {
            throw Failure(field: field, value: "\(value)", rule: "a finite number in 0…\(Limits.maximumMicroseconds)")
        }
    }

    func count(_ field: String, _ value: Int) throws(Failure) {
        guard (0...Limits.maximumCount).contains(value) else {
            throw Failure(field: field, value: String(value), rule: "a count in 0…\(Limits.maximumCount)")
        }
    }

    func date(_ field: String, _ value: Date) throws(Failure) {
        guard Limits.dates.contains(value) else {
            throw Failure(
                field: field, value: ReportDate.string(from: value),
                rule: "a date from \(ReportDate.string(from: Limits.dates.lowerBound)) "
                    + "to \(ReportDate.string(from: Limits.dates.upperBound))")
        }
    }

    func string(_ field: String, _ value: String, maximum: Int = Limits.maximumStringBytes, empty: Bool = true)
        throws(Failure)
    {
        let bytes = value.utf8.count
        guard bytes <= maximum, empty || bytes > 0 else {
            throw Failure(
                field: field, value: bytes == 0 ? "\"\"" : "\(bytes) bytes",
                rule: empty ? "at most \(maximum) bytes" : "1…\(maximum) bytes")
        }
    }

    /// A value as a warning may print it: at most 60 characters, control characters escaped.
    static func shown(_ text: String) -> String {
        let short = text.count > 60 ? String(text.prefix(60)) + "…" : text
        return short.unicodeScalars.map { scalar in
            scalar.properties.generalCategory == .control || scalar.properties.generalCategory == .format
                ? "\\u{\(String(scalar.value, radix: 16))}" : String(scalar)
        }.joined()
    }
}
