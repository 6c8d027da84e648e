// Validation of a decoded report's `leadUp` section: sizes, times and counts a reader may trust.

extension ReportValidator {
    /// Buckets a lead-up may hold (a 600 s window of 10 ms buckets).
    static let maximumLeadUpBuckets = 60_000

    func leadUp(_ section: StallReport.LeadUp) throws(Failure) {
        try date("leadUp.endedAt", section.endedAt)
        if let start = section.stallStartMs { try milliseconds("leadUp.stallStartMs", start, signed: true) }
        try milliseconds("leadUp.windowMs", section.windowMs, signed: false)
        try milliseconds("leadUp.bucketMs", section.bucketMs, signed: false)
        try milliseconds("leadUp.itemMinMs", section.itemMinMs, signed: false)
        let buckets = section.buckets
        let count = buckets.busyMs.count
        guard count <= Self.maximumLeadUpBuckets else {
            throw Failure(
                field: "leadUp.buckets.busyMs", value: "\(count) buckets",
                rule: "at most \(Self.maximumLeadUpBuckets) buckets")
        }
        let columns: [(String, Int)] = [
            ("items", buckets.items.count), ("longestMs", buckets.longestMs.count),
            ("longestLabel", buckets.longestLabel.count), ("maxDelayMs", buckets.maxDelayMs.count),
            ("runQueueWaitMs", buckets.runQueueWaitMs.count), ("cpuMs", buckets.cpuMs.count),
            ("voluntarySwitches", buckets.voluntarySwitches.count),
            ("involuntarySwitches", buckets.involuntarySwitches.count),
        ]
        for (name, length) in columns where length != count {
            throw Failure(
                field: "leadUp.buckets." + name, value: "\(length) values", rule: "one per bucket (\(count))")
        }
        let times = [
            ("busyMs", buckets.busyMs), ("longestMs", buckets.longestMs), ("maxDelayMs", buckets.maxDelayMs),
            ("runQueueWaitMs", buckets.runQueueWaitMs), ("cpuMs", buckets.cpuMs),
        ]
        for (name, column) in times {
            for (index, value) in column.enumerated() {
                try milliseconds("leadUp.buckets.\(name)[\(index)]", value, signed: false)
            }
        }
        for (name, column) in [
            ("items", buckets.items), ("voluntarySwitches", buckets.voluntarySwitches),
            ("involuntarySwitches", buckets.involuntarySwitches),
        ] {
            for (index, value) in column.enumerated() { try self.count("leadUp.buckets.\(name)[\(index)]", value) }
        }
        for (index, label) in buckets.longestLabel.enumerated() {
            try string("leadUp.buckets.longestLabel[\(index)]", label)
        }
        // The lists a writer bounds: a longer one is not a report StallWatch wrote, and would only cost the reader.
        for (name, length, limit) in [
            ("items", section.items.count, StallReport.LeadUp.maxItems),
            ("topItems", section.topItems.count, StallReport.LeadUp.maxItems),
            ("findings", section.findings.count, 16), ("patterns", section.patterns.count, 16),
        ] where length > limit {
            throw Failure(field: "leadUp." + name, value: "\(length) entries", rule: "at most \(limit)")
        }
        for (index, item) in section.items.enumerated() { try self.item("leadUp.items[\(index)]", item) }
        if let from = section.itemsCompleteFromMs { try milliseconds("leadUp.itemsCompleteFromMs", from, signed: true) }
        if let inFlight = section.inFlight { try item("leadUp.inFlight", inFlight) }
        for (index, top) in section.topItems.enumerated() { try item("leadUp.topItems[\(index)]", top) }
        for (index, line) in section.findings.enumerated() { try string("leadUp.findings[\(index)]", line) }
        if let source = section.stackSource {
            if let method = source.method { try string("leadUp.stackSource.method", method) }
            try milliseconds("leadUp.stackSource.intervalMs", source.intervalMs, signed: false)
            try self.count("leadUp.stackSource.samples", source.samples)
            if let note = source.note { try string("leadUp.stackSource.note", note) }
        }
    }

    private func item(_ field: String, _ item: StallReport.LeadUp.Item) throws(Failure) {
        try milliseconds(field + ".startMs", item.startMs, signed: true)
        try milliseconds(field + ".durationMs", item.durationMs, signed: false)
        if let delay = item.delayMs { try milliseconds(field + ".delayMs", delay, signed: false) }
        if let label = item.label { try string(field + ".label", label) }
        guard let stacks = item.stacks else { return }
        typealias ItemStack = StallReport.LeadUp.ItemStack
        guard stacks.count <= ItemStack.maxStacks else {
            throw Failure(
                field: field + ".stacks", value: "\(stacks.count) stacks", rule: "at most \(ItemStack.maxStacks)")
        }
        for (index, stack) in stacks.enumerated() {
            let name = "\(field).stacks[\(index)]"
            try self.count(name + ".samples", stack.samples)
            guard stack.frames.count <= ItemStack.maxFrames else {
                throw Failure(
                    field: name + ".frames", value: "\(stack.frames.count) frames",
                    rule: "at most \(ItemStack.maxFrames)")
            }
            try frames(name + ".frames", stack.frames)
        }
    }
}
