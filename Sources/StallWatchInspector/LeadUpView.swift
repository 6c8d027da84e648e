// LeadUpView: the `leadUp` section as text: sparklines of the window, findings, top items, the latest items.
import StallWatch

/// Renders a report's lead-up for `reports show`: sparklines of utilisation, queue delay and run-queue wait over
/// the window, what the window shows, the longest items, and the latest long items.
struct LeadUpView {
    /// The widest sparkline: wider windows are folded (several buckets per column).
    static let columns = 80
    /// Long items listed at the end (the latest).
    static let latestItems = 10

    /// The lines of the section, after a blank line and its heading; none when the report has no lead-up. The
    /// report must be escaped already (``TerminalText/escaped(_:)``).
    func lines(_ leadUp: StallReport.LeadUp, heading: (String) -> String) -> [String] {
        let ms = ReportTextFormat.number
        let duration = { ReportTextFormat.duration($0) }
        // A snapshot on demand has no stall: its window ends when it was taken, and its item in flight is not stuck.
        let end = leadUp.stallStartMs == nil ? "snapshot" : "detection"
        let ending = leadUp.stallStartMs == nil ? "the snapshot was taken" : "the stall was detected"
        var out = ["", heading("Lead-up: the \(duration(leadUp.windowMs)) before \(ending)")]
        let buckets = leadUp.buckets
        out.append(
            "  \(buckets.count) buckets of \(ms(leadUp.bucketMs)) ms; items over \(ms(leadUp.itemMinMs)) ms listed")
        if buckets.count > 0 {
            let start = -leadUp.windowMs
            let axis = "\(ReportTextFormat.duration(-start)) ago → \(end)"
            let busy = Self.fold(leadUp.utilisation, by: max)
            let delays = Self.fold(buckets.maxDelayMs, by: max)
            let waits = Self.fold(
                buckets.runQueueWaitMs.map { leadUp.bucketMs > 0 ? min(1, $0 / leadUp.bucketMs) : 0 }, by: max)
            var rows: [[String]] = [
                [
                    "busy", Self.sparkline(busy, top: 1),
                    "\(Int((Self.mean(leadUp.utilisation) * 100).rounded())) % on average",
                ]
            ]
            let maxDelay = buckets.maxDelayMs.max() ?? 0
            rows.append(["queue delay", Self.sparkline(delays, top: maxDelay), "max \(duration(maxDelay))"])
            let wait = buckets.runQueueWaitMs.reduce(0, +)
            rows.append(["run queue", Self.sparkline(waits, top: 1), "\(duration(wait)) waiting for a CPU in all"])
            out += ReportTextFormat.table(rows).map { "  " + $0 }
            var marks = "  " + String(repeating: " ", count: 11 + 2) + axis
            if let stall = leadUp.stallStartMs {
                marks += "; the stall began \(duration(-stall)) before detection"
            }
            out.append(marks)
        }
        out += leadUp.findings.map { "  - \($0)" }
        if let inFlight = leadUp.inFlight {
            out.append(
                "  in flight: \(inFlight.label ?? "(unlabelled)"), running \(duration(inFlight.durationMs))"
                    + (leadUp.stallStartMs == nil ? "" : " (the stuck item)")
            )
            out += Self.stackLines(inFlight, indent: "    ")
        }
        if !leadUp.topItems.isEmpty {
            out.append("  Top items (longest first)")
            for (number, item) in leadUp.topItems.enumerated() {
                var line = "    \(number + 1). \(item.label ?? "(unlabelled)"): \(duration(item.durationMs)) from "
                line += "\(Self.offset(item.startMs))"
                if let delay = item.delayMs { line += ", queued \(duration(delay))" }
                out.append(line)
                out += Self.stackLines(item, indent: "       ")
            }
        }
        if let source = leadUp.stackSource {
            var line = "  Stacks: "
            switch source.method {
            case "perf-clock"?:
                line +=
                    "\(source.samples) kept by the kernel (one per \(duration(source.intervalMs)) of the loop's CPU)"
            case let method?:
                line += "\(source.samples) by \(method) (one per \(duration(source.intervalMs)) while busy)"
            case nil: line += "none"
            }
            if let note = source.note { line += "; \(note)" }
            out.append(line)
        }
        if !leadUp.items.isEmpty {
            let shown = leadUp.items.suffix(Self.latestItems)
            out.append("  Latest long items (\(shown.count) of \(leadUp.items.count), oldest first)")
            out += ReportTextFormat.table(
                shown.map { item in
                    [
                        Self.offset(item.startMs), duration(item.durationMs),
                        item.delayMs.map { "queued \(duration($0))" } ?? "", item.label ?? "(unlabelled)",
                    ]
                }
            ).map { "    " + $0 }
            if let from = leadUp.itemsCompleteFromMs {
                out.append("    (older long items were overwritten: the list is complete from \(Self.offset(from)))")
            }
        }
        return out
    }

    /// The frames shown of an item's stack.
    static let stackFrames = 6

    /// An item's stacks: the most sampled one with its innermost frames, the others by their innermost function.
    static func stackLines(_ item: StallReport.LeadUp.Item, indent: String) -> [String] {
        guard let stacks = item.stacks, let top = stacks.first else { return [] }
        let total = stacks.reduce(0) { $0 + $1.samples }
        func shown(_ stack: StallReport.LeadUp.ItemStack) -> ArraySlice<StackFrame> {
            stack.frames.drop(while: ReportDetailView.isMachinery).prefix(stackFrames)
        }
        var out = ["\(indent)\(top.samples) of \(total) samples in:"]
        out += shown(top).map { "\(indent)  \(ReportDetailView.describe($0))" }
        for other in stacks.dropFirst() {
            let leaf = shown(other).first.map { CallTreeView.functionName($0) } ?? "?"
            out.append("\(indent)\(other.samples) of \(total) in \(leaf)")
        }
        return out
    }

    /// `-1.25 s` relative to the window's end.
    static func offset(_ milliseconds: Double) -> String {
        milliseconds < 0
            ? "-" + ReportTextFormat.duration(-milliseconds) : "+" + ReportTextFormat.duration(milliseconds)
    }

    /// At most ``columns`` values: consecutive buckets folded with `combine`.
    static func fold(_ values: [Double], by combine: (Double, Double) -> Double) -> [Double] {
        guard values.count > columns else { return values }
        let per = (values.count + columns - 1) / columns
        return stride(from: 0, to: values.count, by: per).map { start in
            values[start..<min(values.count, start + per)].reduce(0, combine)
        }
    }

    static func mean(_ values: [Double]) -> Double { values.isEmpty ? 0 : values.reduce(0, +) / Double(values.count) }

    /// One block character per value, scaled to `top` (a blank for 0, `█` for `top` and above).
    static func sparkline(_ values: [Double], top: Double) -> String {
        let blocks: [Character] = [" ", "▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"]
        return String(
            values.map { value in
                guard top > 0, value.isFinite, value > 0 else { return blocks[0] }
                let level = Int((min(value, top) / top * 8).rounded(.up))
                return blocks[max(1, min(8, level))]
            })
    }
}
