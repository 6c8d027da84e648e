// The HTML page's lead-up section: SVG sparklines of the window, the findings, the top items.
import StallWatch

extension HTMLReport {
    /// The lead-up of one report: three bar rows (busy share, queue delay, run-queue wait) over the window, with
    /// the stall's start marked, the findings, and the longest items.
    func leadUpSection(_ leadUp: StallReport.LeadUp) -> String {
        func esc(_ text: String) -> String { HTMLReportEscaping.escape(text) }
        let duration = { ReportTextFormat.duration($0) }
        var html = "<h2>Lead-up <span class=\"dim\">(\(esc(duration(leadUp.windowMs))) before "
        html += (leadUp.stallStartMs == nil ? "the snapshot was taken" : "the stall was detected") + ")</span></h2>\n"
        html += leadUpChart(leadUp)
        if !leadUp.findings.isEmpty {
            html += "<ul>\n" + leadUp.findings.map { "<li>\(esc($0))</li>\n" }.joined() + "</ul>\n"
        }
        guard !leadUp.topItems.isEmpty else { return html }
        html += "<h3>Top items</h3>\n<table class=\"groups\">\n<tr><th>Item</th><th>Duration</th><th>Started</th>"
        html += "<th>Queued</th><th>Where it ran</th></tr>\n"
        for item in leadUp.topItems {
            let cells = [
                item.label ?? "(unlabelled)", duration(item.durationMs), LeadUpView.offset(item.startMs),
                item.delayMs.map(duration) ?? "-",
            ]
            html += "<tr>" + cells.map { "<td>\(esc($0))</td>" }.joined()
            html += "<td>\(leadUpStacks(item))</td></tr>\n"
        }
        html += "</table>\n"
        if let source = leadUp.stackSource {
            var line = "stacks: \(source.samples) by \(source.method ?? "none")"
            if let note = source.note { line += "; " + note }
            html += "<p class=\"dim\">\(esc(line))</p>\n"
        }
        return html
    }

    /// An item's sampled stacks, each as its sample count and its innermost frames (escaped), one per line.
    private func leadUpStacks(_ item: StallReport.LeadUp.Item) -> String {
        guard let stacks = item.stacks else { return "-" }
        let total = stacks.reduce(0) { $0 + $1.samples }
        return stacks.map { stack in
            let frames = stack.frames.drop(while: ReportDetailView.isMachinery).prefix(LeadUpView.stackFrames)
            return "<details><summary>\(stack.samples) of \(total) samples: "
                + HTMLReportEscaping.escape(frames.first.map(CallTreeView.functionName) ?? "?") + "</summary><pre>"
                + frames.map { HTMLReportEscaping.escape(ReportDetailView.describe($0)) }.joined(separator: "\n")
                + "</pre></details>"
        }.joined()
    }

    /// Busy share, queue delay and run-queue wait per bucket as bar rows, each bar with its figures on hover.
    private func leadUpChart(_ leadUp: StallReport.LeadUp) -> String {
        let buckets = leadUp.buckets
        guard buckets.count > 0 else { return "<p class=\"dim\">No buckets.</p>\n" }
        let rowHeight = 36.0, labelWidth = 110.0
        let height = rowHeight * 3 + 24
        let step = (width - labelWidth - 10) / Double(buckets.count)
        let maxDelay = max(buckets.maxDelayMs.max() ?? 0, 0.001)
        func coordinate(_ value: Double) -> String { String(format: "%.1f", value) }
        var svg = "<svg class=\"timeline\" xmlns=\"http://www.w3.org/2000/svg\" width=\"\(Int(width))\" "
        svg += "height=\"\(Int(height))\" viewBox=\"0 0 \(Int(width)) \(Int(height))\">\n"
        let rows: [(String, String, (Int) -> Double)] = [
            ("busy", "#4a7fb5", { leadUp.utilisation[$0] }),
            ("queue delay", "#d08a2c", { buckets.maxDelayMs[$0] / maxDelay }),
            (
                "run queue", "#b54a4a",
                { leadUp.bucketMs > 0 ? min(1, buckets.runQueueWaitMs[$0] / leadUp.bucketMs) : 0 }
            ),
        ]
        for (row, (name, colour, value)) in rows.enumerated() {
            let base = Double(row + 1) * rowHeight
            svg += "<text x=\"4\" y=\"\(coordinate(base - 10))\">\(name)</text>\n"
            for index in 0..<buckets.count {
                let share = max(0, min(1, value(index)))
                guard share > 0 else { continue }
                let barHeight = max(1, share * (rowHeight - 6))
                let start = -leadUp.windowMs + Double(index) * leadUp.bucketMs
                var title = "\(LeadUpView.offset(start)): busy \(ReportTextFormat.number(buckets.busyMs[index])) ms, "
                title +=
                    "\(buckets.items[index]) items, longest \(ReportTextFormat.number(buckets.longestMs[index])) ms"
                if !buckets.longestLabel[index].isEmpty { title += " (\(buckets.longestLabel[index]))" }
                title += ", max queue delay \(ReportTextFormat.number(buckets.maxDelayMs[index])) ms, run-queue wait "
                title += "\(ReportTextFormat.number(buckets.runQueueWaitMs[index])) ms"
                svg += "<rect x=\"\(coordinate(labelWidth + Double(index) * step))\" "
                svg += "y=\"\(coordinate(base - barHeight))\" width=\"\(coordinate(max(step - 0.5, 0.5)))\" "
                svg += "height=\"\(coordinate(barHeight))\" fill=\"\(colour)\">"
                svg += "<title>\(HTMLReportEscaping.escape(title))</title></rect>\n"
            }
        }
        if let stall = leadUp.stallStartMs, leadUp.windowMs > 0 {
            let x = labelWidth + (leadUp.windowMs + stall) / leadUp.windowMs * (width - labelWidth - 10)
            svg += "<line x1=\"\(coordinate(x))\" y1=\"2\" x2=\"\(coordinate(x))\" y2=\"\(Int(rowHeight * 3))\" "
            svg += "stroke=\"#000\" stroke-dasharray=\"3,3\"><title>the stall began</title></line>\n"
        }
        svg += "<text x=\"\(Int(labelWidth))\" y=\"\(Int(height - 6))\">"
        svg += "\(HTMLReportEscaping.escape(LeadUpView.offset(-leadUp.windowMs)))</text>"
        svg += "<text x=\"\(Int(width - 10))\" y=\"\(Int(height - 6))\" text-anchor=\"end\">"
        return svg + (leadUp.stallStartMs == nil ? "snapshot" : "detection") + "</text>\n</svg>\n"
    }
}
