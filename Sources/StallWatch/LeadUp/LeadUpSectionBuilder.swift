// LeadUpSectionBuilder: turns a LeadUpCapture into a report's `leadUp` section, with top items and findings.
import Foundation

/// Builds the `leadUp` section of a report from a ``LeadUpCapture``: buckets in milliseconds (the item in flight
/// counted as busy in the buckets it covered), the long items with their labels, the longest items, and what the
/// window shows (``StallReport/LeadUp/Pattern``).
///
/// Pure given its closures: `wallDate` converts times, `label` resolves label ids.
struct LeadUpSectionBuilder {
    /// When the stall began (CLOCK_MONOTONIC).
    var stallStartNanos: UInt64?
    /// False for a snapshot on demand: the item in flight is then not stuck, and nothing is blamed on what ran
    /// before it.
    var forStall = true
    /// The stall threshold, to judge what a long item is.
    var thresholdNanos: UInt64
    /// CLOCK_MONOTONIC → date.
    var wallDate: (UInt64) -> Date
    /// Resolves label ids; nil: as the capture's ``LeadUpCapture/labels`` say.
    var label: ((UInt32) -> String?)? = nil
    /// Resolves the stacks of the top items and the item in flight; nil leaves them out.
    var symbolicate: (([UnwoundFrame]) -> [StackFrame])?

    /// Top items listed.
    static let topItemCount = 5
    /// How far back the patterns look before the stall (or the window's end).
    static let recentNanos: UInt64 = 3_000_000_000

    func build(_ capture: LeadUpCapture) -> StallReport.LeadUp {
        let label = self.label ?? capture.labels.text(for:)
        let window = capture.window
        let end = window.endNanos
        let width = window.settings.bucketNanos
        func ms(_ nanos: UInt64) -> Double { StallReport.milliseconds(nanos) }
        func offset(_ time: UInt64) -> Double {
            time >= end ? ms(time - end) : -ms(end - time)
        }
        var busy = window.buckets.map(\.busyNanos)
        if let inFlight = window.inFlight {
            // The item still running is in no bucket yet: count it where it ran, so a stuck loop reads as busy.
            for index in busy.indices {
                let from = max(window.startNanos &+ UInt64(index) &* width, inFlight.beginNanos)
                let to = min(window.startNanos &+ UInt64(index + 1) &* width, end)
                if to > from { busy[index] = min(width, busy[index] &+ (to - from)) }
            }
        }
        let buckets = StallReport.LeadUp.Buckets(
            busyMs: busy.map(ms), items: window.buckets.map { Int($0.items) },
            longestMs: window.buckets.map { ms($0.longestNanos) },
            longestLabel: window.buckets.map { label($0.longestLabel) ?? "" },
            maxDelayMs: window.buckets.map { ms($0.maxDelayNanos) },
            runQueueWaitMs: window.buckets.map { ms($0.runQueueWaitNanos) },
            cpuMs: window.buckets.map { ms($0.cpuNanos) },
            voluntarySwitches: window.buckets.map { Int($0.voluntarySwitches) },
            involuntarySwitches: window.buckets.map { Int($0.involuntarySwitches) })
        func item(_ raw: LeadUpWindow.Item) -> StallReport.LeadUp.Item {
            .init(
                startMs: offset(raw.beginNanos), durationMs: ms(raw.durationNanos),
                delayMs: raw.delayNanos > 0 ? ms(raw.delayNanos) : nil, label: label(raw.label))
        }
        let stacks = symbolicate.map { symbolicate in
            StackGrouping(
                samples: capture.leaves?.resolvingLeaves(capture.stacks) ?? capture.stacks, symbolicate: symbolicate)
        }
        func itemWithStacks(_ raw: LeadUpWindow.Item) -> StallReport.LeadUp.Item {
            var described = item(raw)
            described.stacks = stacks?.stacks(from: raw.beginNanos, to: raw.beginNanos &+ raw.durationNanos)
            return described
        }
        let top = window.items.enumerated().sorted {
            ($0.element.durationNanos, $0.offset) > ($1.element.durationNanos, $1.offset)
        }.prefix(Self.topItemCount).map(\.element)
        var section = StallReport.LeadUp(
            endedAt: wallDate(end), stallStartMs: stallStartNanos.map(offset),
            windowMs: ms(window.settings.windowNanos), bucketMs: ms(width), itemMinMs: ms(window.settings.itemMinNanos),
            buckets: buckets, items: window.items.suffix(StallReport.LeadUp.maxItems).map(item),
            itemsCompleteFromMs: window.itemsCompleteFromNanos.map(offset),
            inFlight: window.inFlight.map(itemWithStacks), topItems: top.map(itemWithStacks))
        if let origin = capture.stackOrigin {
            section.stackSource = .init(
                method: origin.method?.rawValue, intervalMs: ms(origin.intervalNanos), samples: capture.stacks.count,
                note: origin.note)
        }
        (section.findings, section.patterns) = judge(window, busy: busy, label: label)
        return section
    }

    /// The lead-up's samples grouped for items: each sample resolved once, an item's samples grouped by the
    /// functions of their frames (two samples at other instructions of the same functions are one stack).
    struct StackGrouping {
        private let samples: [(time: UInt64, frames: [StackFrame], key: [String])]

        init(samples raw: [LeadUpStackSample], symbolicate: ([UnwoundFrame]) -> [StackFrame]) {
            samples = raw.map { sample in
                let frames = symbolicate(Array(sample.frames.prefix(StallReport.LeadUp.ItemStack.maxFrames)))
                return (sample.timeNanos, frames, frames.map { $0.symbol ?? "0x" + String($0.address, radix: 16) })
            }
        }

        /// The distinct stacks sampled between `from` and `to`, most samples first (the earliest first among equals).
        func stacks(from: UInt64, to: UInt64) -> [StallReport.LeadUp.ItemStack]? {
            var groups: [(key: [String], frames: [StackFrame], count: Int)] = []
            for sample in samples where sample.time >= from && sample.time <= to {
                if let index = groups.firstIndex(where: { $0.key == sample.key }) {
                    groups[index].count += 1
                } else {
                    groups.append((sample.key, sample.frames, 1))
                }
            }
            guard !groups.isEmpty else { return nil }
            return groups.enumerated().sorted { ($0.element.count, -$0.offset) > ($1.element.count, -$1.offset) }
                .prefix(StallReport.LeadUp.ItemStack.maxStacks)
                .map { StallReport.LeadUp.ItemStack(samples: $0.element.count, frames: $0.element.frames) }
        }
    }

    /// The findings and patterns of the window: a long item just before the stuck one, a loop overloaded for
    /// seconds, a loop thread kept from its CPU.
    private func judge(
        _ window: LeadUpWindow, busy: [UInt64], label: (UInt32) -> String?
    ) -> ([String], [StallReport.LeadUp.Pattern]) {
        var findings: [String] = []
        var patterns: [StallReport.LeadUp.Pattern] = []
        let width = window.settings.bucketNanos
        // The seconds before the stuck item (or the window's end), where the patterns are looked for.
        let until = window.inFlight?.beginNanos ?? stallStartNanos ?? window.endNanos
        let from = until > Self.recentNanos ? until - Self.recentNanos : 0
        let recent = window.buckets.indices.filter { index in
            let start = window.startNanos &+ UInt64(index) &* width
            return start >= from && start &+ width <= until
        }
        func describe(_ item: LeadUpWindow.Item) -> String {
            label(item.label).map { "'\($0)'" } ?? "an unlabelled item"
        }
        func duration(_ nanos: UInt64) -> String { describeNanoseconds(nanos) }

        if forStall, let before = window.items.last(where: { $0.endNanos <= until }),
            until &- before.endNanos <= 2 * width,
            before.durationNanos >= thresholdNanos / 4
        {
            patterns.append(.longItemBefore)
            let gap = until &- before.endNanos
            findings.append(
                "\(describe(before)) ran \(duration(before.durationNanos)) and ended \(duration(gap)) before the "
                    + "stuck item began: the stall may be the tail of it")
        }
        if !recent.isEmpty {
            let span = UInt64(recent.count) &* width
            let busyTotal = recent.reduce(UInt64(0)) { $0 &+ busy[$1] }
            let share = Double(busyTotal) / Double(span)
            let delay = recent.map { window.buckets[$0].maxDelayNanos }.max() ?? 0
            let firstHalf = recent.prefix(recent.count / 2).map { window.buckets[$0].maxDelayNanos }.max() ?? 0
            let growing = delay >= thresholdNanos / 2 && delay > 2 * firstHalf
            if span >= 1_000_000_000 && (share >= 0.9 || growing) {
                patterns.append(.overloaded)
                findings.append(
                    "the loop was \(Int((share * 100).rounded())) % busy over the \(duration(span)) before, "
                        + "largest queue delay \(duration(delay))"
                        + (growing ? " and growing" : "") + ": more work than it could do")
            }
            let wait = recent.reduce(UInt64(0)) { $0 &+ window.buckets[$1].runQueueWaitNanos }
            let cpu = recent.reduce(UInt64(0)) { $0 &+ window.buckets[$1].cpuNanos }
            if wait >= 100_000_000 && Double(wait) >= 0.25 * Double(wait &+ cpu) {
                patterns.append(.cpuStarved)
                findings.append(
                    "the loop thread waited \(duration(wait)) for a CPU over the \(duration(span)) before "
                        + "(\(Int((Double(wait) / Double(wait &+ cpu) * 100).rounded())) % of its runnable time): the "
                        + "CPU was taken away")
            }
        }
        if patterns.isEmpty {
            let total = busy.reduce(UInt64(0), &+)
            let span = UInt64(busy.count) &* width
            var line =
                "the loop was \(span > 0 ? Int((Double(total) / Double(span) * 100).rounded()) : 0) % busy over the window"
            if let longest = window.items.max(by: { $0.durationNanos < $1.durationNanos }) {
                line += "; its longest item, \(describe(longest)), ran \(duration(longest.durationNanos))"
            }
            findings.append(line)
        }
        return (findings, patterns)
    }
}
