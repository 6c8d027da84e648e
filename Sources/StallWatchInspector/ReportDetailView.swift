// ReportDetailView: renders one report for `stallwatch reports show`.
import Foundation
import StallWatch

/// The text of `reports show`: header, notes, annotations, point stack, call tree, samples, images, capture.
public struct ReportDetailView: Sendable {
    package var format: ReportTextFormat
    package var useColor: Bool

    public init(format: ReportTextFormat = ReportTextFormat(), useColor: Bool = false) {
        self.format = format
        self.useColor = useColor
    }

    /// The lines of `reports show`; `allThreads` adds the snapshot of the process's other threads.
    public func lines(_ report: StallReport, path: String? = nil, allThreads: Bool = false) -> [String] {
        let report = TerminalText.escaped(report)
        let path = path.map(TerminalText.escape)
        let style = TextStyle(useColor: useColor)
        func heading(_ text: String) -> String { style.styled(text, "1") }
        let ms = ReportTextFormat.number
        var out: [String] = []
        let severity = report.severity == .hang ? style.styled("hang", "31") : "stall"
        out.append(heading((report.status == .snapshot ? "Snapshot report " : "Stall report ") + report.id))
        var header: [[String]] = []
        let ended = report.endedAt.map { " to \(format.localTime($0, milliseconds: true))" } ?? ""
        header.append(["when", format.localTime(report.startedAt, milliseconds: true) + ended])
        header.append([
            "duration",
            "\(ReportTextFormat.duration(report.durationMs, status: report.status, beganBefore: report.startedBeforeAttach == true)) (\(ms(report.durationMs)) ms)",
        ])
        if let note = ReportTextFormat.beganBeforeNote(report) { header.append(["start", note]) }
        header.append(["severity", "\(severity), \(report.status.rawValue)"])
        if let note = ReportTextFormat.withdrawnNote(report) { header.append(["withdrawn", note]) }
        if let note = ReportTextFormat.snapshotNote(report) { header.append(["snapshot", note]) }
        if let cause = report.cause {
            var text = cause.kind.rawValue + (cause.deadlockCertainty.map { ", \($0.rawValue)" } ?? "")
            if let cycle = cause.deadlockedThreadIds, cycle.count > 1 {
                text += " (threads " + cycle.map(String.init).joined(separator: " ⇄ ") + ")"
            } else if let blocking = cause.blockingThreadId, blocking != report.loop.threadId {
                let name = report.threads?.first { $0.threadId == blocking }?.name
                text += " (blocked by thread \(blocking)" + (name.map { " \($0)" } ?? "") + ")"
            }
            header.append(["cause", text])
            if let process = cause.blockingProcess {
                header.append([
                    "blocking process",
                    "\(process.processId)" + (process.name.isEmpty ? "" : " \(process.name)")
                        + BlockingProcessText.thread(process) + ": \(process.reason)",
                ])
            }
            if let candidates = cause.candidateHolders, !candidates.isEmpty {
                header.append([
                    "candidate holders",
                    "not certain: "
                        + candidates.map { "\($0.threadId) \($0.name) (\($0.confidence.rawValue): \($0.reason))" }
                        .joined(separator: "; "),
                ])
            }
        }
        if let occurrences = report.occurrences, occurrences > 1 {
            var text = "\(occurrences) stalls with this signature"
            if let first = report.firstSeen, let last = report.lastSeen {
                text +=
                    ", \(format.localTime(first, milliseconds: false)) to \(format.localTime(last, milliseconds: false))"
            }
            header.append(["occurrences", text])
        }
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
        if report.linesPending {
            // Written before its images' line tables had loaded: the watcher rewrites the file with them shortly.
            let later =
                report.status == .ongoing ? "the final report will have them" : "the file is rewritten with them"
            header.append(["lines", "pending: some frames have no file:line yet (\(later))"])
        }
        if let path { header.append(["file", path]) }
        out += ReportTextFormat.table(header).map { "  " + $0 }

        if let cause = report.cause, !cause.evidence.isEmpty {
            out += ["", heading("Evidence")] + cause.evidence.map { "  - \($0)" }
        }
        let hungAwait = HungAwaitView(format: format).rows(report)
        if !hungAwait.isEmpty {
            out +=
                ["", heading("Hung await")] + ReportTextFormat.table(hungAwait.map { [$0.0, $0.1] }).map { "  " + $0 }
        }
        if let context = report.context { out += ["", heading("Context"), "  " + Self.describe(context)] }
        if !report.notes.isEmpty {
            out += ["", heading("Notes")] + report.notes.map { "  - \($0)" }
        }
        if !report.annotations.isEmpty {
            out += ["", heading("Annotations")]
            out += ReportTextFormat.table(report.annotations.sorted { $0.key < $1.key }.map { [$0.key, $0.value] })
                .map { "  " + $0 }
        }
        if let leadUp = report.leadUp { out += LeadUpView().lines(leadUp, heading: heading) }
        out += pointStackLines(report, heading: heading)
        if let process = report.cause?.blockingProcess, let stack = process.frames, !stack.isEmpty {
            let thread = process.threadId.map { ", thread \($0)" } ?? ""
            out += ["", heading("Blocking process \(process.processId)\(thread): its stack while the loop waited")]
            let width = String(max(stack.count - 1, 0)).count
            for (number, frame) in stack.enumerated() {
                out.append(
                    "  #" + String(number).padding(toLength: width, withPad: " ", startingAt: 0) + " "
                        + Self.describe(frame))
            }
        }
        let tree = CallTree(samples: report.samples, isMachinery: Self.isMachinery)
        if tree.total > 0 {
            out += ["", heading("Call tree (\(tree.total) sample\(tree.total == 1 ? "" : "s"), callers first)")]
            out += CallTreeView().lines(tree).map { "  " + $0 }
        }
        if !report.samples.isEmpty {
            out += ["", heading("Samples")]
            let withThreadState = report.samples.contains { $0.thread != nil }
            out += ReportTextFormat.table(
                report.samples.map { sample in
                    [
                        "+\(ms(sample.offsetMs)) ms", sample.pauseMicros.map { "pause \(ms($0)) µs" } ?? "",
                    ] + (withThreadState ? [sample.thread.map(Self.describe) ?? ""] : []) + [
                        sample.error.map { "error: \($0)" }
                            ?? sample.frames.first(where: { !Self.isMachinery($0) }).map { CallTreeView.label($0) }
                            ?? ""
                    ]
                }
            ).map { "  " + $0 }
        }
        out += threadLines(report, allThreads: allThreads, heading: heading)
        if !report.images.isEmpty {
            out += ["", heading("Images")]
            out += ReportTextFormat.table(
                report.images.map { image in
                    [
                        image.base.hexAddress, image.size.map { "size " + $0.hexAddress } ?? "",
                        image.buildId ?? "no build-id",
                        image.path,
                    ]
                }
            ).map { "  " + $0 }
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

    /// The other threads at the first sample: with `allThreads` every one with its stack; otherwise the threads
    /// the cause names, with their stacks, and a count of the rest.
    private func threadLines(_ report: StallReport, allThreads: Bool, heading: (String) -> String) -> [String] {
        guard let threads = report.threads, !threads.isEmpty else {
            return allThreads ? ["", heading("Threads"), "  this report has no snapshot of the other threads"] : []
        }
        let named = Set(
            (report.cause?.deadlockedThreadIds ?? []) + [report.cause?.blockingThreadId].compactMap { $0 }
                + (report.cause?.candidateHolders ?? []).filter { $0.processId == nil }.map(\.threadId)
        )
        .subtracting([report.loop.threadId])
        let shown = threads.filter { allThreads || named.contains($0.threadId) }
        guard !shown.isEmpty || allThreads else {
            return [
                "", heading("Threads"), "  \(threads.count) thread(s) at the first sample; --all-threads shows them",
            ]
        }
        var out = ["", heading(allThreads ? "Threads (\(threads.count))" : "Threads named by the cause")]
        for thread in shown {
            var line = "  thread \(thread.threadId) \(thread.name): state \(thread.state)"
            if let syscall = thread.syscall { line += ", in \(syscall)" }
            if let wchan = thread.wchan { line += " (\(wchan))" }
            if let owner = thread.waitingForThreadId { line += ", waits for thread \(owner)" }
            out.append(line)
            if let error = thread.error, thread.frames.isEmpty { out.append("    \(error)") }
            for (number, frame) in thread.frames.enumerated() { out.append("    #\(number) \(Self.describe(frame))") }
        }
        if !allThreads, threads.count > shown.count {
            out.append("  (\(threads.count - shown.count) more thread(s); --all-threads shows them)")
        }
        return out
    }

    static func describe(_ t: StallReport.ThreadState) -> String {
        var text = "state \(t.state)"
        if let syscall = t.syscall { text += " in \(syscall)" }
        text += ", cpu \(ReportTextFormat.number(t.cpuTimeMs)) ms"
        return text
    }

    static func describe(_ c: StallReport.SystemContext) -> String {
        var parts: [String] = []
        if let p = c.processCpuPercent { parts.append("process CPU \(ReportTextFormat.number(p))%") }
        if let p = c.loopCpuPercent { parts.append("loop thread CPU \(ReportTextFormat.number(p))%") }
        if let load = c.loadAverage, load.count == 3 {
            parts.append("load " + load.map { ReportTextFormat.number($0) }.joined(separator: " "))
            if let cpus = c.cpuCount { parts[parts.count - 1] += " on \(cpus) CPUs" }
        }
        if let t = c.cgroupThrottledMs, t > 0 { parts.append("cgroup throttled \(ReportTextFormat.number(t)) ms") }
        if let s = c.stealPercent, s > 0 { parts.append("steal \(ReportTextFormat.number(s))%") }
        if let busy = c.diskBusyPercent, busy > 0 {
            var disk = "disk busy \(ReportTextFormat.number(busy))%"
            if let moved = c.diskMiB { disk += ", \(ReportTextFormat.number(moved)) MiB" }
            if let own = c.processDiskMiB { disk += " (the process's own \(ReportTextFormat.number(own)) MiB)" }
            parts.append(disk)
        }
        return parts.joined(separator: "; ")
    }

    /// The stack the most samples share (the report's signature is computed from it), numbered innermost first.
    private func pointStackLines(_ report: StallReport, heading: (String) -> String) -> [String] {
        guard let point = report.pointStack ?? StallSignature.dominantStack(of: report.samples) else { return [] }
        let stack = point.frames
        // A hung await has no samples (no thread is stuck): its point stack is the task's async backtrace.
        let title =
            report.samples.isEmpty
            ? "Point stack (async backtrace of the last suspension, innermost first)"
            : "Point stack (\(point.count) of \(report.samples.count) samples)"
        var out = ["", heading(title)]
        let width = String(max(stack.count - 1, 0)).count
        for (number, frame) in stack.enumerated() {
            let label = "#" + String(number).padding(toLength: width, withPad: " ", startingAt: 0)
            out.append("  \(label) \(Self.describe(frame))")
        }
        return out
    }

    /// Signal trampolines and StallWatch's capture code, trimmed from the inner end of call-tree stacks.
    static func isMachinery(_ frame: StackFrame) -> Bool {
        frame.symbol.map(ApplicationFrame.isMachinery) ?? false
    }

    /// `0x… symbol + off (image) file:line`; without a symbol `0x… image + offset`; else just the address. The first
    /// frame past a runtime's stack switch (kind `stackSwitch`, Go's cgo) ends in `[stack switch]`.
    static func describe(_ frame: StackFrame) -> String {
        var text = frame.address.hexAddress
        if let symbol = frame.readableName {
            text += " " + symbol
            if let offset = frame.symbolOffset { text += " + \(offset)" }
            if let image = frame.image { text += " (\(ApplicationFrame.imageName(image)))" }
        } else if let image = frame.image {
            text += " " + ApplicationFrame.imageName(image)
            if let offset = frame.offset { text += " + " + offset.hexAddress }
        }
        if let file = frame.file {
            text += " " + file + (frame.line.map { ":\($0)" } ?? "")
        }
        if frame.kind == .stackSwitch { text += " [stack switch]" }
        return text
    }
}
