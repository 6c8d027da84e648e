// ReportDetailView: renders one report for `stallwatch reports show`.
import Foundation
import StallWatch

/// The text of `reports show`: header, notes, annotations, point stack, call tree, samples, images, capture.
public struct ReportDetailView: Sendable {
    public var format: ReportTextFormat
    public var useColor: Bool

    public init(format: ReportTextFormat = ReportTextFormat(), useColor: Bool = false) {
        self.format = format
        self.useColor = useColor
    }

    /// The lines of `reports show`; `allThreads` adds the snapshot of the process's other threads.
    public func lines(_ report: StallReport, path: String? = nil, allThreads: Bool = false) -> [String] {
        let console = Console(output: { _ in }, errorOutput: { _ in }, useColor: useColor)
        func heading(_ text: String) -> String { console.styled(text, "1") }
        let ms = ReportTextFormat.number
        var out: [String] = []
        let severity = report.severity == .hang ? console.styled("hang", "31") : "stall"
        out.append(heading("Stall report \(report.id)"))
        var header: [[String]] = []
        let ended = report.endedAt.map { " to \(format.localTime($0, milliseconds: true))" } ?? ""
        header.append(["when", format.localTime(report.startedAt, milliseconds: true) + ended])
        header.append([
            "duration",
            "\(ReportTextFormat.duration(report.durationMs, status: report.status)) (\(ms(report.durationMs)) ms)",
        ])
        header.append(["severity", "\(severity), \(report.status.rawValue)"])
        header.append(["phase", "\(report.loop.phase), iteration \(report.loop.iteration)"])
        header.append(["loop", "\(report.loop.name) (thread \(report.loop.threadId))"])
        let detection = report.detection
        header.append([
            "detection",
            "\(detection.source), \(detection.strategy), threshold \(ms(detection.thresholdMs)) ms "
                + "(hang \(ms(detection.hangThresholdMs)) ms), latency \(ms(detection.latencyMs)) ms",
        ])
        let process = report.process
        header.append(["process", "\(process.pid) \(process.executable) on \(process.host)"])
        if let buildId = process.buildId { header.append(["build-id", buildId]) }
        header.append(["signature", report.signature])
        if let path { header.append(["file", path]) }
        out += ReportTextFormat.table(header).map { "  " + $0 }

        if !report.notes.isEmpty {
            out += ["", heading("Notes")] + report.notes.map { "  - \($0)" }
        }
        if !report.annotations.isEmpty {
            out += ["", heading("Annotations")]
            out += ReportTextFormat.table(report.annotations.sorted { $0.key < $1.key }.map { [$0.key, $0.value] })
                .map { "  " + $0 }
        }
        out += pointStackLines(report, heading: heading)
        let tree = CallTree(samples: report.samples, isMachinery: Self.isMachinery)
        if tree.total > 0 {
            out += ["", heading("Call tree (\(tree.total) sample\(tree.total == 1 ? "" : "s"), callers first)")]
            out += CallTreeView().lines(tree).map { "  " + $0 }
        }
        if !report.samples.isEmpty {
            out += ["", heading("Samples")]
            out += ReportTextFormat.table(report.samples.map { sample in
                [
                    "+\(ms(sample.offsetMs)) ms", sample.pauseMicros.map { "pause \(ms($0)) µs" } ?? "",
                    sample.error.map { "error: \($0)" }
                        ?? sample.frames.first(where: { !Self.isMachinery($0) }).map { CallTreeView.label($0) } ?? "",
                ]
            }).map { "  " + $0 }
        }
        if allThreads {
            out += ["", heading("Threads")]
            out.append("  this report has no snapshot of the other threads (schema version \(report.schemaVersion))")
        }
        if !report.images.isEmpty {
            out += ["", heading("Images")]
            out += ReportTextFormat.table(report.images.map { image in
                [image.base, image.size.map { "size " + $0.hexAddress } ?? "", image.buildId ?? "no build-id", image.path]
            }).map { "  " + $0 }
        }
        let capture = report.capture
        out += ["", heading("Capture")]
        out.append(
            "  \(capture.method), every \(ms(capture.sampleIntervalMs)) ms: \(capture.samplesTaken) samples taken, "
                + "\(capture.samplesFailed) failed")
        var costs: [String] = []
        if let median = capture.pauseMicrosMedian {
            costs.append("pause median \(ms(median)) µs" + (capture.pauseMicrosMax.map { ", max \(ms($0)) µs" } ?? ""))
        }
        if let unwind = capture.unwindMicrosMedian { costs.append("unwind median \(ms(unwind)) µs") }
        if let symbols = capture.symbolicationMicros { costs.append("symbolication \(ms(symbols)) µs") }
        if !costs.isEmpty { out.append("  " + costs.joined(separator: "; ")) }
        if !capture.errors.isEmpty {
            out += ["", heading("Errors")] + capture.errors.map { "  - \($0)" }
        }
        return out
    }

    /// The stack the most samples share (the report's signature is computed from it), numbered innermost first.
    private func pointStackLines(_ report: StallReport, heading: (String) -> String) -> [String] {
        guard let point = report.pointStack ?? StallSignature.dominantStack(of: report.samples) else { return [] }
        let stack = point.frames
        var out = ["", heading("Point stack (\(point.count) of \(report.samples.count) samples)")]
        let width = String(max(stack.count - 1, 0)).count
        for (number, frame) in stack.enumerated() {
            let label = "#" + String(number).padding(toLength: width, withPad: " ", startingAt: 0)
            out.append("  \(label) \(Self.describe(frame))")
        }
        return out
    }

    /// Signal trampolines and StallWatch's capture code, trimmed from the inner end of call-tree stacks.
    static func isMachinery(_ frame: StackFrame) -> Bool {
        frame.symbol.map(ReportSummary.isMachinery) ?? false
    }

    /// `0x… symbol + off (image) file:line`; without a symbol `0x… image + offset`; else just the address.
    public static func describe(_ frame: StackFrame) -> String {
        var text = frame.address
        if let symbol = frame.symbol {
            text += " " + symbol
            if let offset = frame.symbolOffset { text += " + \(offset)" }
            if let image = frame.image { text += " (\(ReportSummary.imageName(image)))" }
        } else if let image = frame.image {
            text += " " + ReportSummary.imageName(image)
            if let offset = frame.offset { text += " + \(offset)" }
        }
        if let file = frame.file {
            text += " " + file + (frame.line.map { ":\($0)" } ?? "")
        }
        return text
    }
}
