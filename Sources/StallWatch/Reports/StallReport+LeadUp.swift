// The report's `leadUp` section: what the loop ran in the seconds before a stall.
import Foundation

extension StallReport {
    /// The loop's last seconds before the stall was detected: buckets of loop time, the long items with their
    /// labels, the longest of them, the loop thread's run-queue trend, and what they add up to (`findings`,
    /// `patterns`).
    ///
    /// Times inside are milliseconds relative to ``endedAt`` (negative: before it).
    package struct LeadUp: Codable, Sendable, Equatable {
        /// What the window shows, when it shows something a reader should not miss.
        package enum Pattern: String, Codable, Sendable, CaseIterable {
            /// A long item ended just before the stuck one began: the stall may be the tail of it.
            case longItemBefore
            /// The loop was busy nearly all the time for seconds, or its queue delay grew: more work than it can do.
            case overloaded
            /// The loop thread waited for a CPU (run-queue wait) for a large share of the window: the CPU was taken
            /// away.
            case cpuStarved
        }

        /// The window's buckets, one value per bucket in each column, oldest first.
        package struct Buckets: Codable, Sendable, Equatable {
            /// Time inside items, clipped to the bucket.
            package var busyMs: [Double]
            /// Items that ended in the bucket.
            package var items: [Int]
            /// The longest item that ended in the bucket, and its label ("" when none).
            package var longestMs: [Double]
            package var longestLabel: [String]
            /// The largest queue delay (queued → started) of an item that ended in the bucket.
            package var maxDelayMs: [Double]
            /// The loop thread's time waiting for a CPU, and on a CPU, in the bucket (/proc schedstat, read about
            /// once a bucket while the loop is active: a reading spans the buckets since the last one).
            package var runQueueWaitMs: [Double]
            package var cpuMs: [Double]
            /// Its context switches in the bucket.
            package var voluntarySwitches: [Int]
            package var involuntarySwitches: [Int]

            package init(
                busyMs: [Double] = [], items: [Int] = [], longestMs: [Double] = [], longestLabel: [String] = [],
                maxDelayMs: [Double] = [], runQueueWaitMs: [Double] = [], cpuMs: [Double] = [],
                voluntarySwitches: [Int] = [], involuntarySwitches: [Int] = []
            ) {
                self.busyMs = busyMs
                self.items = items
                self.longestMs = longestMs
                self.longestLabel = longestLabel
                self.maxDelayMs = maxDelayMs
                self.runQueueWaitMs = runQueueWaitMs
                self.cpuMs = cpuMs
                self.voluntarySwitches = voluntarySwitches
                self.involuntarySwitches = involuntarySwitches
            }

            /// The number of buckets (every column has it).
            package var count: Int { busyMs.count }
        }

        /// One item of loop work (a performed block, a timer's or source's run, a turn).
        package struct Item: Codable, Sendable, Equatable {
            /// When it began, relative to `endedAt`.
            package var startMs: Double
            package var durationMs: Double
            /// Queued → started, when known.
            package var delayMs: Double?
            /// Its label (annotations, a `perform` label, a timer's or source's name), when it had one.
            package var label: String?
            /// Where it spent its time: the loop thread's distinct stacks sampled while it ran, most samples first
            /// (top items and the item in flight only; nil when none was sampled).
            package var stacks: [ItemStack]?

            package init(
                startMs: Double, durationMs: Double, delayMs: Double? = nil, label: String? = nil,
                stacks: [ItemStack]? = nil
            ) {
                self.startMs = startMs
                self.durationMs = durationMs
                self.delayMs = delayMs
                self.label = label
                self.stacks = stacks
            }
        }

        /// One stack of the loop thread sampled while an item ran, and how many of its samples had it (by function).
        package struct ItemStack: Codable, Sendable, Equatable {
            package var samples: Int
            /// Innermost first, at most ``maxFrames``.
            package var frames: [StackFrame]

            package init(samples: Int, frames: [StackFrame]) {
                self.samples = samples
                self.frames = frames
            }

            /// The most frames an item's stack keeps, and the most stacks an item lists.
            package static let maxFrames = 48
            package static let maxStacks = 3
        }

        /// How the loop thread's stacks in the lead-up were taken.
        package struct StackSource: Codable, Sendable, Equatable {
            /// `perf-clock`: a ring the kernel kept (perf's software task clock, user stacks by frame pointers, no
            /// signal); `sampler`: StallWatch's own sampler about once a bucket while the loop was busy; nil when no
            /// stacks were taken (see `note`).
            package var method: String?
            /// Time between samples: the loop thread's CPU time for `perf-clock`, wall time while busy for `sampler`.
            package var intervalMs: Double
            /// Samples taken in the window.
            package var samples: Int
            /// Why the kernel's ring was not used, when it was not.
            package var note: String?

            package init(method: String?, intervalMs: Double, samples: Int, note: String? = nil) {
                self.method = method
                self.intervalMs = intervalMs
                self.samples = samples
                self.note = note
            }
        }

        /// The window's end: when the stall was detected.
        package var endedAt: Date
        /// When the stall began, relative to `endedAt`.
        package var stallStartMs: Double?
        package var windowMs: Double
        package var bucketMs: Double
        /// Items at least this long are listed one by one in `items`.
        package var itemMinMs: Double
        package var buckets: Buckets
        /// Every item of at least `itemMinMs` that ended in the window, oldest first (at most ``maxItems``, the
        /// latest).
        package var items: [Item]
        /// Set when older long items of the window were no longer held: `items` is complete from here on.
        package var itemsCompleteFromMs: Double?
        /// The item running at `endedAt` (the stuck one, for a stall), with its duration so far.
        package var inFlight: Item?
        /// The longest items of the window, longest first.
        package var topItems: [Item]
        /// What the window shows, one sentence each.
        package var findings: [String]
        package var patterns: [Pattern]
        /// How the stacks of `topItems` and `inFlight` were taken; nil when stacks are off.
        package var stackSource: StackSource?

        /// The most items a report lists.
        package static let maxItems = 500

        package init(
            endedAt: Date, stallStartMs: Double? = nil, windowMs: Double,
            bucketMs: Double, itemMinMs: Double, buckets: Buckets, items: [Item] = [],
            itemsCompleteFromMs: Double? = nil, inFlight: Item? = nil, topItems: [Item] = [],
            findings: [String] = [], patterns: [Pattern] = [], stackSource: StackSource? = nil
        ) {
            self.endedAt = endedAt
            self.stallStartMs = stallStartMs
            self.windowMs = windowMs
            self.bucketMs = bucketMs
            self.itemMinMs = itemMinMs
            self.buckets = buckets
            self.items = items
            self.itemsCompleteFromMs = itemsCompleteFromMs
            self.inFlight = inFlight
            self.topItems = topItems
            self.findings = findings
            self.patterns = patterns
            self.stackSource = stackSource
        }

        /// Every bucket's busy share of its width, 0…1.
        package var utilisation: [Double] {
            buckets.busyMs.map { bucketMs > 0 ? min(1, max(0, $0 / bucketMs)) : 0 }
        }
    }
}
