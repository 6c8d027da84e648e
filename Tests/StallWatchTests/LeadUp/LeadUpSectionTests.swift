// The `leadUp` section built from a window: times relative to detection, and what the window shows.
import Foundation
import StallWatchTestSupport
import Testing

@testable import StallWatch

@Suite(.offPool) struct LeadUpSectionTests {
    static let ms: UInt64 = 1_000_000
    static let width = 100 * ms
    /// The window's first bucket starts here; the window is 5 s of 100 ms buckets.
    static let start: UInt64 = 1_000_000 * width
    static let settings = LeadUpSettings(windowNanos: 5000 * ms, bucketNanos: width, itemMinNanos: ms)

    static func builder(stallStart: UInt64) -> LeadUpSectionBuilder {
        LeadUpSectionBuilder(
            stallStartNanos: stallStart, thresholdNanos: 250 * ms,
            wallDate: { Date(timeIntervalSince1970: Double($0) / 1e9) },
            label: { [1: "warmCaches", 2: "stuck", 3: "request"][$0] })
    }

    /// A window ending 500 ms after its 45th bucket began, the stuck item (label 2) running from 4,500 ms.
    static func window(
        buckets: [LeadUpWindow.Bucket] = Array(repeating: .init(), count: 50), items: [LeadUpWindow.Item] = []
    ) -> LeadUpWindow {
        LeadUpWindow(
            settings: settings, endNanos: start + 4750 * ms, startNanos: start, buckets: buckets, items: items,
            inFlight: .init(beginNanos: start + 4500 * ms, endNanos: start + 4750 * ms, delayNanos: 0, label: 2))
    }

    @Test func timesAreRelativeToDetectionAndTheStuckItemCountsAsBusyWhereItRan() {
        let (start, ms) = (Self.start, Self.ms)
        let item = LeadUpWindow.Item(
            beginNanos: start + 4000 * ms, endNanos: start + 4450 * ms, delayNanos: 0, label: 1)
        let section = Self.builder(stallStart: Self.start + 4500 * Self.ms).build(
            LeadUpCapture(window: Self.window(items: [item])))
        #expect(section.stallStartMs == -250)
        #expect(section.items.first?.startMs == -750)
        #expect(section.items.first?.durationMs == 450)
        #expect(section.inFlight?.label == "stuck")
        #expect(section.inFlight?.durationMs == 250)
        #expect(section.buckets.busyMs[45...47] == [100, 100, 50])
        #expect(section.windowMs == 5000)
        #expect(section.buckets.count == 50)
    }

    @Test func aLongItemEndingJustBeforeTheStuckOneIsCalledOut() {
        let (start, ms) = (Self.start, Self.ms)
        let item = LeadUpWindow.Item(
            beginNanos: start + 4000 * ms, endNanos: start + 4450 * ms, delayNanos: 0, label: 1)
        let section = Self.builder(stallStart: Self.start + 4500 * Self.ms).build(
            LeadUpCapture(window: Self.window(items: [item])))
        #expect(section.patterns == [.longItemBefore])
        #expect(section.topItems.first?.label == "warmCaches")
        #expect(section.findings.first?.hasPrefix("'warmCaches' ran 450") == true)
    }

    @Test func aShortItemBeforeTheStallIsNotBlamedAndTheFindingSaysHowBusyTheLoopWas() {
        let (start, ms) = (Self.start, Self.ms)
        let item = LeadUpWindow.Item(
            beginNanos: start + 4480 * ms, endNanos: start + 4490 * ms, delayNanos: 0, label: 3)
        var buckets = Array(repeating: LeadUpWindow.Bucket(), count: 50)
        buckets[44].busyNanos = 10 * Self.ms
        let section = Self.builder(stallStart: Self.start + 4500 * Self.ms).build(
            LeadUpCapture(window: Self.window(buckets: buckets, items: [item])))
        #expect(section.patterns.isEmpty)
        #expect(section.findings.count == 1)
        #expect(section.findings.first?.contains("'request'") == true)
    }

    @Test func secondsOfFullBucketsBeforeTheStallReadAsOverloaded() {
        var buckets = Array(repeating: LeadUpWindow.Bucket(), count: 50)
        for index in 10..<45 { buckets[index] = .init(busyNanos: 97 * Self.ms, items: 40, maxDelayNanos: 20 * Self.ms) }
        let section = Self.builder(stallStart: Self.start + 4500 * Self.ms).build(
            LeadUpCapture(window: Self.window(buckets: buckets)))
        #expect(section.patterns == [.overloaded])
        #expect(section.findings.first?.contains("97 % busy") == true)
    }

    @Test func aLoopThreadWaitingForACPUReadsAsStarved() {
        var buckets = Array(repeating: LeadUpWindow.Bucket(), count: 50)
        for index in 20..<45 {
            buckets[index] = .init(
                busyNanos: 40 * Self.ms, items: 4, runQueueWaitNanos: 30 * Self.ms, cpuNanos: 40 * Self.ms)
        }
        let section = Self.builder(stallStart: Self.start + 4500 * Self.ms).build(
            LeadUpCapture(window: Self.window(buckets: buckets)))
        #expect(section.patterns == [.cpuStarved])
        #expect(section.findings.first?.contains("waited") == true)
    }
}
