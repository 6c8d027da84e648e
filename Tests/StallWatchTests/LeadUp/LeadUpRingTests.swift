// The lead-up rings on their own: buckets add up, long items are listed, a wrapped ring says what it lost.
import CStallWatchCore
import StallWatchTestSupport
import Testing

@testable import StallWatch

@Suite(.offPool) struct LeadUpRingTests {
    static let ms: UInt64 = 1_000_000
    /// A bucket boundary far from zero, so "before the window" exists.
    static let base: UInt64 = 1_000_000 * 100 * ms

    func ring(windowMs: UInt64 = 1000, bucketMs: UInt64 = 100, itemMs: UInt64 = 1) throws -> LeadUpRing {
        try #require(
            LeadUpRing(
                settings: LeadUpSettings(
                    windowNanos: windowMs * Self.ms, bucketNanos: bucketMs * Self.ms, itemMinNanos: itemMs * Self.ms)))
    }

    func run(_ ring: LeadUpRing, from begin: UInt64, for duration: UInt64, label: UInt32, delay: UInt64 = 0) {
        sw_leadup_begin(ring.pointer, begin, label)
        sw_leadup_end(ring.pointer, begin, begin + duration, label, delay)
    }

    @Test func itemsInOneBucketAddUpAndOnlyThoseOverTheMinimumAreListed() throws {
        let ring = try ring()
        let start = Self.base + 10 * Self.ms
        run(ring, from: start, for: Self.ms / 2, label: 7)
        run(ring, from: start + Self.ms, for: 2 * Self.ms, label: 8, delay: 3 * Self.ms)
        run(ring, from: start + 4 * Self.ms, for: Self.ms / 4, label: 9, delay: Self.ms)
        let window = ring.window(endingAt: start + 50 * Self.ms)
        #expect(window.buckets.count == 10)
        let last = try #require(window.buckets.last)
        #expect(last.items == 3)
        #expect(last.busyNanos == 2 * Self.ms + Self.ms / 2 + Self.ms / 4)
        #expect(last.longestNanos == 2 * Self.ms)
        #expect(last.longestLabel == 8)
        #expect(last.maxDelayNanos == 3 * Self.ms)
        #expect(window.buckets.dropLast().allSatisfy { $0 == LeadUpWindow.Bucket() })
        #expect(window.items.map(\.label) == [8])
        #expect(window.items.first?.durationNanos == 2 * Self.ms)
        #expect(window.itemsCompleteFromNanos == nil)
        #expect(window.inFlight == nil)
    }

    @Test func anItemSpanningBucketsIsBusyInEachItCoveredAndCountedWhereItEnded() throws {
        let ring = try ring()
        // 240 ms from 50 ms into the window's sixth bucket: 50 + 100 + 90 ms busy, ending in the eighth.
        let begin = Self.base + 550 * Self.ms
        run(ring, from: begin, for: 240 * Self.ms, label: 3)
        let window = ring.window(endingAt: Self.base + 950 * Self.ms)
        #expect(window.startNanos == Self.base)
        #expect(window.buckets.map { $0.busyNanos / Self.ms } == [0, 0, 0, 0, 0, 50, 100, 90, 0, 0])
        #expect(window.buckets.map(\.items) == [0, 0, 0, 0, 0, 0, 0, 1, 0, 0])
        #expect(window.buckets[7].longestNanos == 240 * Self.ms)
    }

    @Test func theItemRunningAtTheWindowsEndIsInFlight() throws {
        let ring = try ring()
        run(ring, from: Self.base, for: 5 * Self.ms, label: 1)
        sw_leadup_begin(ring.pointer, Self.base + 10 * Self.ms, 2)
        let window = ring.window(endingAt: Self.base + 400 * Self.ms)
        let inFlight = try #require(window.inFlight)
        #expect(inFlight.label == 2)
        #expect(inFlight.durationNanos == 390 * Self.ms)
    }

    @Test func bucketsAndItemsOlderThanTheWindowAreLeftOut() throws {
        let ring = try ring()
        run(ring, from: Self.base, for: 5 * Self.ms, label: 1)
        // Three seconds later, in a one-second window: the old bucket's slot is reused and nothing old shows.
        run(ring, from: Self.base + 3000 * Self.ms, for: 2 * Self.ms, label: 2)
        let window = ring.window(endingAt: Self.base + 3050 * Self.ms)
        #expect(window.items.map(\.label) == [2])
        #expect(window.buckets.map(\.items).reduce(0, +) == 1)
        #expect(window.buckets.last?.busyNanos == 2 * Self.ms)
    }

    @Test func aWrappedItemRingKeepsTheLatestAndSaysFromWhenTheListIsComplete() throws {
        let ring = try ring()
        let capacity = Int(ring.settings.itemCapacity)
        // More long items inside the window than the ring holds: 2 ms each, back to back.
        let count = capacity + 44
        for index in 0..<count {
            run(ring, from: Self.base + UInt64(index) * 2 * Self.ms, for: 2 * Self.ms, label: UInt32(index + 1))
        }
        let window = ring.window(endingAt: Self.base + UInt64(count) * 2 * Self.ms)
        #expect(window.items.count == capacity)
        #expect(window.items.first?.label == 45)
        #expect(window.items.last?.label == UInt32(count))
        #expect(window.itemsCompleteFromNanos == Self.base + 44 * 2 * Self.ms)
        // The buckets still count every item.
        #expect(window.buckets.map(\.items).reduce(0, +) == UInt32(count))
    }

    @Test func schedulerFiguresLandInTheBucketOfTheirReading() throws {
        let ring = try ring()
        ring.addSchedule(
            at: Self.base + 120 * Self.ms, runQueueWaitNanos: 7 * Self.ms, cpuNanos: 90 * Self.ms, voluntary: 2,
            involuntary: 5)
        ring.addSchedule(
            at: Self.base + 150 * Self.ms, runQueueWaitNanos: Self.ms, cpuNanos: Self.ms, voluntary: 1, involuntary: 0)
        let window = ring.window(endingAt: Self.base + 950 * Self.ms)
        #expect(window.buckets[1].runQueueWaitNanos == 8 * Self.ms)
        #expect(window.buckets[1].cpuNanos == 91 * Self.ms)
        #expect(window.buckets[1].voluntarySwitches == 3)
        #expect(window.buckets[1].involuntarySwitches == 5)
        #expect(window.buckets.enumerated().allSatisfy { $0.offset == 1 || $0.element.cpuNanos == 0 })
    }
}

@Suite(.offPool) struct LeadUpLabelsTests {
    @Test func aLabelKeepsItsIdAndAnEmptyLabelIsZero() {
        let labels = LeadUpLabels()
        let id = labels.id(for: "route=/sessions")
        #expect(id != 0)
        #expect(labels.id(for: "route=/sessions") == id)
        #expect(labels.text(for: id) == "route=/sessions")
        #expect(labels.id(for: "") == 0)
        #expect(labels.text(for: 0) == nil)
    }

    @Test func anEvictedLabelsIdResolvesToNothingRatherThanToItsSuccessor() {
        let labels = LeadUpLabels()
        let first = labels.id(for: "label 0")
        for index in 1...LeadUpLabels.capacity { _ = labels.id(for: "label \(index)") }
        #expect(labels.text(for: first) == nil)
        #expect(labels.text(for: labels.id(for: "label \(LeadUpLabels.capacity)")) == "label \(LeadUpLabels.capacity)")
    }

    @Test func longAndUnprintableLabelsAreCutAndFiltered() {
        let labels = LeadUpLabels()
        let long = String(repeating: "é", count: 200)
        let text = labels.text(for: labels.id(for: long))
        #expect(text.map { $0.utf8.count <= LeadUpLabels.maxLength } == true)
        #expect(text.map { $0.allSatisfy { $0 == "é" } } == true)
        #expect(labels.text(for: labels.id(for: "a\u{1B}[31mb"))?.contains("\u{1B}") == false)
    }
}
