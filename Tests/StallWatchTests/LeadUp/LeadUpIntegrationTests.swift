// The lead-up of a real EventLoop under the watchdog: a stall's report shows the items that ran before it.
import CStallWatchCore
import Dispatch
import Foundation
import StallWatchTestSupport
import Synchronization
import Testing

@testable import StallWatch

@Suite(.offPool, .serialized) struct LeadUpIntegrationTests {
    /// Runs on the CPU for `milliseconds` of the loop's own clock.
    static func spin(milliseconds: UInt64) {
        let end = sw_monotonic_ns() + milliseconds * 1_000_000
        var x: UInt64 = 1
        while sw_monotonic_ns() < end { x = x &* 6_364_136_223_846_793_005 &+ 1 }
        precondition(x != 0)
    }

    /// Checks that the lead-up's top items are its longest items, longest first, and that the item labelled `label`
    /// is among them. Which item leads is the machine's doing as well as the program's: holding the loop thread off
    /// its CPU inside a short item makes that item long, and the lead-up rightly ranks it by what it lasted.
    static func expectTopItemsAreTheLongest(
        _ leadUp: StallReport.LeadUp, including label: String, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let top = leadUp.topItems
        let described = top.map { "\($0.label ?? "-") \($0.durationMs) ms" }
        #expect(top.contains { $0.label == label }, "\(described)", sourceLocation: sourceLocation)
        let durations = top.map(\.durationMs)
        #expect(durations == durations.sorted(by: >), "\(described)", sourceLocation: sourceLocation)
        let others = leadUp.items.filter { item in
            !top.contains { $0.startMs == item.startMs && $0.label == item.label && $0.durationMs == item.durationMs }
        }
        let longestOther = others.map(\.durationMs).max() ?? 0
        #expect(
            longestOther <= durations.last ?? 0, "an item of \(longestOther) ms is not among \(described)",
            sourceLocation: sourceLocation)
    }

    /// A function whose name a stack sampled while it ran shows. It runs for `milliseconds` of its thread's own
    /// CPU time: the kernel's ring samples the thread every 10 ms of that time, so a loaded machine that gives the
    /// thread a fraction of a CPU stretches the item, not its samples away.
    @inline(never) static func warmUpCaches(milliseconds: UInt64) {
        func cpuNanos() -> UInt64 {
            var now = timespec()
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now)
            return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
        }
        // The thread's CPU clock is a system call, and the ring keeps user-space samples only: it is read every
        // few tens of microseconds of work, so that the samples land in this function.
        let end = cpuNanos() + milliseconds * 1_000_000
        var x: UInt64 = 1
        while cpuNanos() < end {
            for _ in 0..<20_000 { x = x &* 6_364_136_223_846_793_005 &+ 1 }
        }
        precondition(x != 0)
    }

    /// Runs `work` on a watched loop (threshold `thresholdMs`) and returns the report of the one stall stuck in the
    /// item labelled `stuck` (the lead-up's item in flight), once it ended; with the lead-up off, of the one stall.
    ///
    /// A machine loaded enough to hold the loop thread off its CPU past the threshold during an earlier turn makes
    /// that turn a stall of its own, rightly reported: such reports are allowed beside it, never a second one stuck
    /// in the same item.
    func report(
        thresholdMs: Int = 250, leadUp: Bool = true, stacks: LeadUpStackMode = .auto, stuck: String? = nil,
        _ work: (EventLoop) -> Void
    ) throws -> StallReport {
        let directory = Fixtures.temporaryDirectory("lead-up")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let loop = try EventLoop(name: "lead-up", mainQueue: .disabled)
        var config = StallWatchConfiguration()
        config.thresholdMs = thresholdMs
        config.reportDirectory = directory
        config.leadUp = leadUp
        config.leadUpStacks = stacks
        let ended = DispatchSemaphore(value: 0)
        let watchdog = Watchdog(loop: loop, configuration: config) { event in
            if case .ended(let report) = event, stuck == nil || report.leadUp?.inFlight?.label == stuck {
                ended.signal()
            }
        }
        try watchdog.start()
        let thread = startLoopThread(loop)
        work(loop)
        // Bounded: a stall never detected fails here rather than hanging the suite.
        let outcome = ended.wait(timeout: .now() + .seconds(90))
        loop.stop()
        watchdog.stop()
        _ = thread
        try #require(outcome == .success, "no stall ended within 90 s")
        let reports = try Fixtures.reports(in: directory)
        let described = reports.map {
            "\(Int($0.durationMs)) ms stuck in \($0.leadUp?.inFlight?.label ?? "-"), cause \($0.cause?.kind.rawValue ?? "-")"
        }
        let stalls = reports.filter { stuck == nil || $0.leadUp?.inFlight?.label == stuck }
        try #require(stalls.count == 1, "\(described)")
        return stalls[0]
    }

    @Test(.timeLimit(.minutes(3)))
    func aStallsReportRanksTheLongItemBeforeItAmongTheTopItemsAndTheStuckItemInFlight() throws {
        // A threshold well above the first turn (20 ms of ticks and warmCaches' 200 ms): only a machine that holds
        // the loop thread off its CPU for the rest makes that turn a stall of its own (allowed beside, see `report`).
        let report = try report(thresholdMs: 400, stuck: "stallOnCPU") { loop in
            for index in 0..<20 { loop.perform(label: "tick") { Self.spin(milliseconds: index % 2 == 0 ? 2 : 0) } }
            // Two turns of the loop, as a service's requests would come: warmCaches stays under the threshold, so
            // the stall is stallOnCPU alone, and the report's lead-up shows what ran just before it.
            loop.perform(label: "warmCaches") {
                Self.spin(milliseconds: 200)
                loop.perform(label: "stallOnCPU") { Self.spin(milliseconds: 900) }
            }
        }
        let leadUp = try #require(report.leadUp)
        let warm = try #require(leadUp.items.last { $0.label == "warmCaches" })
        #expect(warm.durationMs >= 200)
        Self.expectTopItemsAreTheLongest(leadUp, including: "warmCaches")
        // The stuck item began after warmCaches ended (the stall's start is a coarse-clock reading, a few ms
        // early; the items' times are the loop's own precise ones).
        let stuck = try #require(leadUp.inFlight)
        #expect(stuck.label == "stallOnCPU")
        #expect(warm.startMs + warm.durationMs <= stuck.startMs)
        #expect(try #require(leadUp.stallStartMs) < 0)
        #expect(leadUp.patterns.contains(.longItemBefore))
        #expect(leadUp.findings.first?.contains("'warmCaches' ran") == true)
        // Items are listed from `itemMinMs` (1 ms) of the loop's own clock: the ten "tick" items of 2 ms are, and the
        // 0 ms ones only counted in their buckets — unless the machine held the loop thread off its CPU inside one
        // for a millisecond, which makes it a listed item of that length (so at most twenty ticks are listed).
        let ticks = leadUp.items.filter { $0.label == "tick" }
        #expect(ticks.filter { $0.durationMs >= 2 }.count >= 10, "\(ticks.map(\.durationMs))")
        #expect(ticks.count <= 20)
        #expect(leadUp.items.allSatisfy { $0.durationMs >= leadUp.itemMinMs }, "\(leadUp.items.map(\.durationMs))")
        #expect(leadUp.buckets.items.reduce(0, +) >= 22)
        #expect(leadUp.buckets.count == 100)
        // The loop thread spun through the warm-up and into the stall: the scheduler readings saw that time, on a CPU
        // or (on a loaded machine) waiting for one.
        let scheduled = leadUp.buckets.cpuMs.reduce(0, +) + leadUp.buckets.runQueueWaitMs.reduce(0, +)
        #expect(
            scheduled >= 100,
            "cpu \(leadUp.buckets.cpuMs.reduce(0, +)) ms, run queue \(leadUp.buckets.runQueueWaitMs.reduce(0, +)) ms")
        #expect(leadUp.utilisation.contains { $0 > 0.9 })
    }

    @Test(.timeLimit(.minutes(3)))
    func anItemIsNamedByTheAnnotationsSetWhileItRanAndCarriesItsQueueDelay() throws {
        let report = try report(stuck: "stuck") { loop in
            loop.perform {
                // Queued as the 30 ms item starts (not by the test's thread, which may get to it only later): its
                // queue delay is at least that item's 30 ms.
                loop.perform(label: "queued") { Self.spin(milliseconds: 3) }
                loop.perform(label: "stuck") { Self.spin(milliseconds: 500) }
                loop.annotate("route", "/sessions")
                Self.spin(milliseconds: 30)
                loop.clearAnnotations()
            }
        }
        let leadUp = try #require(report.leadUp)
        let annotated = try #require(leadUp.items.first { $0.label == "route=/sessions" })
        #expect(annotated.durationMs >= 30)
        let queued = try #require(leadUp.items.first { $0.label == "queued" })
        #expect((queued.delayMs ?? 0) >= 30)
    }

    @Test(.timeLimit(.minutes(3)))
    func withTheLeadUpOffAReportHasNone() throws {
        let report = try report(leadUp: false) { loop in
            loop.perform(label: "stuck") { Self.spin(milliseconds: 500) }
        }
        #expect(report.leadUp == nil)
    }

    /// The report of a stall in `stallOnCPU` right after `warmUpCaches` ran 300 ms of its CPU time as the item before it.
    func reportAfterWarmingUp(stacks: LeadUpStackMode) throws -> StallReport {
        try report(thresholdMs: 400, stacks: stacks, stuck: "stallOnCPU") { loop in
            // The stuck item is a timer 5 ms after the warm-up: the loop idles in between, so a machine that
            // stretches the warm-up (300 ms of CPU time) past the threshold makes it a stall of its own, which
            // ends there, not the head of the stuck item's.
            loop.perform(label: "warmUpCaches") {
                Self.warmUpCaches(milliseconds: 300)
                loop.schedule(after: .milliseconds(5), label: "stallOnCPU") { Self.spin(milliseconds: 700) }
            }
        }
    }

    /// The stacks listed for `label` among the top items, and whether its most sampled one ran in `function`.
    func expectTopStack(_ leadUp: StallReport.LeadUp, label: String, function: String) throws {
        let item = try #require(leadUp.topItems.first { $0.label == label }, "\(leadUp.topItems)")
        let stacks = try #require(item.stacks, "no stacks for \(label): \(String(describing: leadUp.stackSource))")
        #expect(stacks.count <= StallReport.LeadUp.ItemStack.maxStacks)
        #expect(stacks.map(\.samples) == stacks.map(\.samples).sorted(by: >))
        let top = try #require(stacks.first)
        #expect(
            top.frames.contains { $0.symbol?.contains(function) == true },
            "\(top.frames.map { $0.symbol ?? "?" })")
    }

    @Test(.timeLimit(.minutes(3)))
    func aLongItemsStacksComeFromTheKernelsRingAndNameTheFunctionItRanIn() throws {
        let report = try reportAfterWarmingUp(stacks: .auto)
        let leadUp = try #require(report.leadUp)
        let source = try #require(leadUp.stackSource)
        #expect(source.method == "perf-clock", "\(source)")
        #expect(source.note == nil)
        try expectTopStack(leadUp, label: "warmUpCaches", function: "warmUpCaches")
        // The kernel samples every 10 ms of the thread's CPU time: 300 ms of it spinning give it many samples, and
        // the stuck item in flight (700 ms spinning) has its own.
        let warm = try #require(leadUp.topItems.first { $0.label == "warmUpCaches" })
        let warmSamples = (warm.stacks ?? []).reduce(0) { $0 + $1.samples }
        #expect(warmSamples >= 5, "\(warmSamples) samples in 300 ms of spinning")
        #expect(leadUp.inFlight?.stacks?.first?.frames.contains { $0.symbol?.contains("spin") == true } == true)
    }

    @Test(.timeLimit(.minutes(3)))
    func withTheSamplerALongItemsStacksNameTheFunctionItRanIn() throws {
        let report = try reportAfterWarmingUp(stacks: .sampler)
        let leadUp = try #require(report.leadUp)
        let source = try #require(leadUp.stackSource)
        #expect(source.method == "sampler", "\(source)")
        #expect(source.intervalMs == leadUp.bucketMs)
        try expectTopStack(leadUp, label: "warmUpCaches", function: "warmUpCaches")
    }

    @Test(.timeLimit(.minutes(3)))
    func withStacksOffTheLeadUpHasNoneAndNoSource() throws {
        let report = try reportAfterWarmingUp(stacks: .off)
        let leadUp = try #require(report.leadUp)
        #expect(leadUp.stackSource == nil)
        #expect(leadUp.topItems.allSatisfy { $0.stacks == nil })
        #expect(leadUp.inFlight?.stacks == nil)
    }
}
