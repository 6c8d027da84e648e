// LeadUpRing: one loop's lead-up rings (sw_leadup), written by the loop thread and copied out as a LeadUpWindow.
import CStallWatchCore

extension StallWatchConfiguration {
    /// The lead-up rings' sizes (`leadUpWindowMs`, `leadUpBucketMs`, `leadUpItemMs`).
    package var leadUpSettings: LeadUpSettings {
        LeadUpSettings(
            windowNanos: UInt64(leadUpWindowMs) * 1_000_000, bucketNanos: UInt64(leadUpBucketMs) * 1_000_000,
            itemMinNanos: UInt64(leadUpItemMs) * 1_000_000)
    }
}

/// The sizes of one loop's lead-up rings, from the configuration.
package struct LeadUpSettings: Sendable, Equatable {
    /// How far back the window reaches (`leadUpWindowMs`).
    package var windowNanos: UInt64
    /// The width of one bucket (`leadUpBucketMs`).
    package var bucketNanos: UInt64
    /// Items at least this long are kept one by one (`leadUpItemMs`).
    package var itemMinNanos: UInt64
    /// Long items kept: enough for the window at 200 long items per second, at most 8,192.
    package var itemCapacity: UInt32 {
        UInt32(min(8192, max(256, windowNanos / 5_000_000)))
    }

    package init(windowNanos: UInt64, bucketNanos: UInt64, itemMinNanos: UInt64) {
        self.windowNanos = windowNanos
        self.bucketNanos = bucketNanos
        self.itemMinNanos = itemMinNanos
    }

    /// Bytes the rings take (allocated once per loop).
    package var footprint: UInt64 { sw_leadup_footprint(windowNanos, bucketNanos, itemCapacity) }
}

/// One loop's lead-up rings: fixed buckets of loop time and the last long items, in one allocation that lives as
/// long as this object.
///
/// The loop thread writes them through ``LoopState`` (relaxed stores, see `sw_leadup.h`); the watching side adds
/// the loop thread's scheduler figures (``addSchedule(at:runQueueWaitNanos:cpuNanos:voluntary:involuntary:)``) and
/// copies a window out (``window(endingAt:)``) for a report.
package final class LeadUpRing: @unchecked Sendable {
    // @unchecked Sendable: the rings are touched only through sw_leadup's atomics (one loop writer, one scheduler
    // writer, any number of readers).
    package let settings: LeadUpSettings
    package let pointer: UnsafeMutablePointer<sw_leadup>
    /// The rings were allocated here and are freed with this object (not those of a pool worker, which the worker
    /// keeps writing for as long as the process lives).
    private let owned: Bool

    /// Nil when the rings cannot be allocated.
    init?(settings: LeadUpSettings) {
        guard
            let pointer = sw_leadup_create(
                settings.windowNanos, settings.bucketNanos, settings.itemMinNanos, settings.itemCapacity)
        else { return nil }
        self.settings = settings
        self.pointer = pointer
        owned = true
    }

    /// Rings allocated and owned elsewhere (a pool worker's), with the sizes they were made with.
    init(borrowing pointer: UnsafeMutablePointer<sw_leadup>) {
        self.pointer = pointer
        settings = LeadUpSettings(
            windowNanos: UInt64(pointer.pointee.bucket_count) &* pointer.pointee.bucket_ns,
            bucketNanos: pointer.pointee.bucket_ns, itemMinNanos: pointer.pointee.item_min_ns)
        owned = false
    }

    deinit { if owned { sw_leadup_destroy(pointer) } }

    /// Adds the loop thread's scheduler figures since the previous reading to the bucket holding `at`.
    func addSchedule(at: UInt64, runQueueWaitNanos: UInt64, cpuNanos: UInt64, voluntary: UInt32, involuntary: UInt32) {
        sw_leadup_add_sched(pointer, at, runQueueWaitNanos, cpuNanos, voluntary, involuntary)
    }

    /// The window that ends with the bucket holding `end` (CLOCK_MONOTONIC): its buckets and long items, copied.
    package func window(endingAt end: UInt64) -> LeadUpWindow {
        let count = Int(pointer.pointee.bucket_count)
        let capacity = Int(pointer.pointee.item_capacity)
        var buckets = [sw_leadup_bucket](repeating: sw_leadup_bucket(), count: count)
        var sched = [sw_leadup_sched](repeating: sw_leadup_sched(), count: count)
        var items = [sw_leadup_item](repeating: sw_leadup_item(), count: capacity)
        let result = buckets.withUnsafeMutableBufferPointer { b in
            sched.withUnsafeMutableBufferPointer { s in
                items.withUnsafeMutableBufferPointer { i in
                    sw_leadup_copy(pointer, end, b.baseAddress, s.baseAddress, i.baseAddress)
                }
            }
        }
        var currentLabel: UInt32 = 0
        let currentBegin = sw_leadup_current(pointer, &currentLabel)
        let width = settings.bucketNanos
        let first = result.first_bucket
        return LeadUpWindow(
            settings: settings, endNanos: end, startNanos: (first &- 1) &* width,
            buckets: (0..<Int(result.buckets)).map { index in
                let b = buckets[index], s = sched[index]
                return LeadUpWindow.Bucket(
                    busyNanos: b.busy_ns, items: b.items, longestNanos: b.longest_ns, longestLabel: b.longest_label,
                    maxDelayNanos: b.max_delay_ns, runQueueWaitNanos: s.run_queue_wait_ns, cpuNanos: s.cpu_ns,
                    voluntarySwitches: s.voluntary, involuntarySwitches: s.involuntary)
            },
            items: items.prefix(Int(result.items)).map {
                LeadUpWindow.Item(
                    beginNanos: $0.begin_ns, endNanos: $0.end_ns, delayNanos: $0.delay_ns, label: $0.label)
            },
            itemsCompleteFromNanos: result.items_from_ns == 0 ? nil : result.items_from_ns,
            inFlight: currentBegin == 0 || currentBegin > end
                ? nil
                : LeadUpWindow.Item(
                    beginNanos: currentBegin, endNanos: end, delayNanos: 0,
                    label: currentLabel))
    }
}

/// A copy of one loop's lead-up rings over a window: what a report's `leadUp` section is built from. Label ids
/// are resolved when the report is built (``LeadUpLabels``).
package struct LeadUpWindow: Sendable, Equatable {
    package struct Bucket: Sendable, Equatable {
        package var busyNanos: UInt64 = 0
        package var items: UInt32 = 0
        package var longestNanos: UInt64 = 0
        package var longestLabel: UInt32 = 0
        package var maxDelayNanos: UInt64 = 0
        package var runQueueWaitNanos: UInt64 = 0
        package var cpuNanos: UInt64 = 0
        package var voluntarySwitches: UInt32 = 0
        package var involuntarySwitches: UInt32 = 0
    }

    package struct Item: Sendable, Equatable {
        package var beginNanos: UInt64
        package var endNanos: UInt64
        package var delayNanos: UInt64
        package var label: UInt32
        package var durationNanos: UInt64 { endNanos &- beginNanos }
    }

    package var settings: LeadUpSettings
    /// The window's end (CLOCK_MONOTONIC): when the stall began, or the snapshot was asked for.
    package var endNanos: UInt64
    /// The start of its first bucket.
    package var startNanos: UInt64
    /// Oldest first, one per bucket of the window.
    package var buckets: [Bucket]
    /// Long items that ended in the window, oldest first.
    package var items: [Item]
    /// Set when the ring had overwritten older long items of the window: the list is complete from then on.
    package var itemsCompleteFromNanos: UInt64?
    /// The item running at the window's end (a stall's stuck item, or what a snapshot interrupted).
    package var inFlight: Item?
}
