// The watchdog in this process: a healthy busy loop is never blamed; a stuck one is, once.
import CStallWatchCore
import Dispatch
import Foundation
import StallWatchTestSupport
import Synchronization
import Testing

@testable import StallWatch

@Suite(.offPool, .serialized) struct WatchdogTests {
    func configuration(directory: String, thresholdMs: Int = 250) -> StallWatchConfiguration {
        var config = StallWatchConfiguration()
        config.thresholdMs = thresholdMs
        config.reportDirectory = directory
        return config
    }

    @Test(.timeLimit(.minutes(3)))
    func healthyLoopRunning100kShortWorkItemsPerSecondWritesNoReport() throws {
        let directory = Fixtures.temporaryDirectory("healthy")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let loop = try EventLoop(name: "healthy", mainQueue: .disabled)
        // What concerns the loop; a late wake-up of the watchdog's own thread (a loaded machine) says nothing of it.
        let events = Recorder<String>()
        let watchdog = Watchdog(loop: loop, configuration: configuration(directory: directory)) {
            if case .lateWakeup = $0 { return }
            events.append("\($0)")
        }
        try watchdog.start()
        let thread = startLoopThread(loop)
        let executed = Atomic<Int>(0)
        // 100k items/s for 2 s: 1,000 items every 10 ms.
        let start = DispatchTime.now().uptimeNanoseconds
        for tick in 0..<200 {
            for _ in 0..<1000 { loop.perform { executed.add(1, ordering: .relaxed) } }
            let next = start + UInt64(tick + 1) * 10_000_000
            let now = DispatchTime.now().uptimeNanoseconds
            if next > now { usleep(UInt32((next - now) / 1000)) }  // pacing the producer, not synchronisation
        }
        let drained = DispatchSemaphore(value: 0)
        loop.perform { drained.signal() }
        drained.wait()
        loop.stop()
        watchdog.stop()
        _ = thread
        #expect(executed.load(ordering: .relaxed) == 200_000)
        #expect(events.values.isEmpty, "unexpected events: \(events.values)")
        #expect(try Fixtures.reports(in: directory).isEmpty)
    }

    @Test(.timeLimit(.minutes(3)))
    func stuckLoopIsReportedOnceWithTheExactDurationAndItsStack() throws {
        let directory = Fixtures.temporaryDirectory("stuck")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let loop = try EventLoop(name: "stuck", mainQueue: .disabled)
        let ended = DispatchSemaphore(value: 0)
        let events = Recorder<String>()
        let watchdog = Watchdog(loop: loop, configuration: configuration(directory: directory, thresholdMs: 100)) {
            event in
            switch event {
            case .began: events.append("began")
            case .ended: events.append("ended"); ended.signal()
            case .sampled: events.append("sampled")
            default: events.append("\(event)")
            }
        }
        try watchdog.start()
        _ = startLoopThread(loop)
        loop.perform {
            // The service tags the work it is doing; a stall during it carries the tags.
            loop.annotate("request", "42")
            loop.annotate("route", "/messages")
            WatchdogTests.blockLoopThread(milliseconds: 400)
            loop.clearAnnotations()
        }
        ended.wait()
        loop.stop()
        watchdog.stop()

        let values = events.values
        #expect(values.first == "began")
        #expect(values.filter { $0 == "began" }.count == 1)
        #expect(values.filter { $0 == "ended" }.count == 1)
        #expect(values.contains("sampled"))
        let reports = try Fixtures.reports(in: directory)
        try #require(reports.count == 1)
        #expect(reports[0].status == .ended)
        #expect(reports[0].durationMs >= 360 && reports[0].durationMs <= 500, "duration \(reports[0].durationMs)")
        #expect(reports[0].loop.phase == "beforeSources")
        #expect(reports[0].annotations == ["request": "42", "route": "/messages"])
        let frames = reports[0].samples.flatMap(\.frames)
        let blocking = frames.filter { $0.symbol?.contains("blockLoopThread") == true }
        // What each sample held (its offset, error, frame count and first images), and the capture's own account.
        let held = reports[0].samples.map { sample in
            "\(sample.offsetMs) ms: \(sample.error ?? "ok"), \(sample.frames.count) frames, "
                + "\(sample.frames.prefix(3).map { $0.symbol ?? $0.image ?? "?" })"
        }
        #expect(
            !blocking.isEmpty,
            "\(frames.compactMap(\.symbol)); samples \(held); capture \(reports[0].capture); notes \(reports[0].notes)")
        // Debug builds carry DWARF: the frame has this file and a line in the function.
        #expect(blocking.contains { $0.file?.hasSuffix("WatchdogTests.swift") == true && ($0.line ?? 0) > 0 })
        try Fixtures.expectReportsValidate(in: directory)
    }

    /// A stall that runs one function and then another shows both in the call tree, each with as many samples as
    /// were captured while it ran. Which function ran at each sample is judged by the loop thread's own clock (when
    /// each function was entered and returned, from the phase start the samples' offsets count from) against each
    /// sample's capture time — not by an assumed split of the samples: on a loaded machine the watching thread gets
    /// the CPU unevenly, so how many samples fall in each half follows when it ran, not how long each half was.
    @Test(.timeLimit(.minutes(3)))
    func stallSpentInTwoFunctionsShowsBothInTheCallTreeInProportion() throws {
        let directory = Fixtures.temporaryDirectory("two-functions")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let loop = try EventLoop(name: "two-functions", mainQueue: .disabled)
        var config = configuration(directory: directory, thresholdMs: 100)
        config.sampleIntervalMs = 20
        // The all-thread snapshot at detection takes as long as the other threads of this test process (tests
        // running in parallel) take to answer: left out, so it cannot eat into the first function's samples.
        config.maxThreads = 0
        let ended = DispatchSemaphore(value: 0)
        let watchdog = Watchdog(loop: loop, configuration: config) { if case .ended = $0 { ended.signal() } }
        try watchdog.start()
        _ = startLoopThread(loop)
        // The loop thread's clock: the phase start (as the watchdog reads it), then each function's start and end,
        // read inside the function itself (a mark read outside it leaves the caller's own code — and any wait for
        // a CPU there — between the mark and the function).
        let marks = Mutex<[UInt64]>([])
        loop.perform {
            let phaseStart = loop.state.snapshot().phaseStartNanos
            let first = WatchdogTests.computeFirstHalf(milliseconds: 600)
            let second = WatchdogTests.computeSecondHalf(milliseconds: 600)
            marks.withLock { $0 = [phaseStart, first.start, first.end, second.start, second.end] }
        }
        // A missed stall fails here rather than hanging the suite.
        let endedInTime = ended.wait(timeout: .now() + 30) == .success
        loop.stop()
        watchdog.stop()
        try #require(endedInTime, "no stall reported within 30 s")
        let reports = try Fixtures.reports(in: directory)
        try #require(reports.count == 1, "\(reports.map { ($0.durationMs, $0.samples.map(\.offsetMs), $0.notes) })")
        let report = reports[0]
        let times = marks.withLock { $0 }
        try #require(times.count == 5)
        // Offsets have two decimals: a sample within 0.01 ms of an entry or a return may be on either side of it.
        let ms = { (time: UInt64) in Double(time &- times[0]) / 1e6 }
        let first = (ms(times[1]) + 0.01)..<(ms(times[2]) - 0.01)
        let second = (ms(times[3]) + 0.01)..<(ms(times[4]) - 0.01)
        let functions = ["computeFirstHalf", "computeSecondHalf"]
        func names(_ frames: [StackFrame]) -> [String] {
            functions.filter { name in frames.contains { $0.symbol?.contains(name) == true } }
        }
        // Each sample shows the function that ran when it was captured; none shows the loop after the stall.
        var captured = [0, 0]
        for sample in StallSignature.aggregatable(report.samples) {
            let shown = names(sample.frames)
            for (index, span) in [first, second].enumerated() where span.contains(sample.offsetMs) {
                captured[index] += 1
                #expect(
                    shown == [functions[index]], "sample at \(sample.offsetMs) ms: \(shown); spans \(first), \(second)")
            }
            #expect(sample.offsetMs <= report.durationMs, "a sample at \(sample.offsetMs) ms of \(report.durationMs)")
        }
        // The call tree counts every sample under the function it shows: both functions, in that proportion.
        var counts = [0, 0]
        func visit(_ node: CallTree.Node) {
            for (index, name) in functions.enumerated() where node.frame.symbol?.contains(name) == true {
                counts[index] += node.count
            }
            node.children.forEach(visit)
        }
        (report.callTree ?? []).forEach(visit)
        let showing = functions.map { name in
            StallSignature.aggregatable(report.samples).filter { names($0.frames) == [name] }.count
        }
        let detail =
            report.samples.map { "\(Int($0.offsetMs)):\(names($0.frames).first ?? $0.error ?? "-")" }.joined(
                separator: " ")
            + " in \(report.durationMs) ms; notes \(report.notes); errors \(report.capture.errors)"
        #expect(counts == showing, "\(detail)")
        #expect(captured[0] >= 1 && captured[1] >= 1, "\(detail); spans \(first), \(second)")
        #expect(counts[0] >= captured[0] && counts[1] >= captured[1], "\(detail)")
        // The point stack is the function with the most samples (either one on a tie), and only that one.
        let inPoint = names(try #require(report.pointStack).frames)
        #expect(inPoint.count == 1 && inPoint.allSatisfy { counts[functions.firstIndex(of: $0)!] == counts.max() })
    }

    @Test(.timeLimit(.minutes(3)))
    func classicStrategyDetectsTheSameStall() throws {
        let directory = Fixtures.temporaryDirectory("classic")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let created = sw_monotonic_ns()
        let loop = try EventLoop(name: "classic", mainQueue: .disabled)
        var config = configuration(directory: directory, thresholdMs: 100)
        config.strategy = .classic
        let ended = DispatchSemaphore(value: 0)
        let watchdog = Watchdog(loop: loop, configuration: config) { if case .ended = $0 { ended.signal() } }
        // The loop's own clock: each transition as an observer sees it (right after the loop stamps it), and the
        // blocking item's own start and end.
        let transitions = Mutex<[(activity: LoopActivity, at: UInt64)]>([])
        loop.addObserver(activities: .allActivities) { activity in
            transitions.withLock { $0.append((activity, sw_monotonic_ns())) }
        }
        let item = Mutex<(start: UInt64, end: UInt64, phaseStart: UInt64)>((0, 0, 0))
        try watchdog.start()
        _ = startLoopThread(loop)
        loop.perform {
            let start = sw_monotonic_ns()
            // The loop's own stamp of this busy phase's start (the coarse clock), as the watchdog reads it.
            let phaseStart = loop.state.snapshot().phaseStartNanos
            WatchdogTests.blockLoopThread(milliseconds: 400)
            let end = sw_monotonic_ns()
            item.withLock { $0 = (start, end, phaseStart) }
        }
        ended.wait()
        loop.stop()
        watchdog.stop()
        let reports = try Fixtures.reports(in: directory)
        try #require(reports.count == 1)
        #expect(reports[0].detection.strategy == .classic)
        // The stall is the busy phase around the item: at least the item, and no longer than from the loop's own
        // stamp of that phase's start to its first transition after the item (stamped by an observer, which runs
        // just after the loop's own stamp; 0.01 ms for the report's rounding). The stamp is the coarse clock, which
        // lags by up to a tick (more when a virtual CPU's tick comes late): it is after the loop's creation less that
        // lag, and before the item's start.
        let (start, end, phaseStart) = item.withLock { $0 }
        let after = try #require(transitions.withLock { $0 }.first { $0.at >= end }?.at)
        let itemMs = Double(end - start) / 1e6
        let outerMs = Double(after - phaseStart) / 1e6 + 0.01
        #expect(
            phaseStart <= start && phaseStart + 50_000_000 >= created, "phase stamped \(phaseStart), created \(created)"
        )
        #expect(
            reports[0].durationMs >= itemMs && reports[0].durationMs <= outerMs,
            "\(reports[0].durationMs) ms for an item of \(itemMs) ms, \(outerMs) ms from the phase's stamped start")
    }

    @Test(.timeLimit(.minutes(3)))
    func aLoopCanHaveOnlyOneWatchdog() throws {
        let loop = try EventLoop(name: "single", mainQueue: .disabled)
        let directory = Fixtures.temporaryDirectory("single")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let first = Watchdog(loop: loop, configuration: configuration(directory: directory))
        try first.start()
        let second = Watchdog(loop: loop, configuration: configuration(directory: directory))
        #expect(throws: StallWatchError.self) { try second.start() }
        first.stop()
        try second.start()
        second.stop()
    }

    /// A thousand starts and stops, then this process's threads and descriptors settle back to what they were after
    /// the first (which creates what lives for the process: the sampler). Exact: run alone, by
    /// ``StressTests/LeaksAlone``, where no other test starts threads or opens descriptors meanwhile.
    func checkStartingAndStoppingAThousandTimesLeavesNothingBehind() throws {
        let loop = try EventLoop(name: "churn", mainQueue: .disabled)
        let directory = Fixtures.temporaryDirectory("churn")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let watchdog = Watchdog(loop: loop, configuration: configuration(directory: directory))
        try watchdog.start()
        watchdog.stop()
        let threadsBefore = Self.threadCount()
        let fdsBefore = Self.fdCount()
        for _ in 0..<1000 {
            try watchdog.start()
            watchdog.stop()
        }
        // A thread may still be on its way out when stop returns: the counts are read until they come back.
        #expect(
            Self.settles(Self.threadCount, within: threadsBefore), "threads: \(threadsBefore) → \(Self.threadCount())")
        #expect(Self.settles(Self.fdCount, within: fdsBefore), "descriptors: \(fdsBefore) → \(Self.fdCount())")
    }

    /// Whether `read()` comes back to `limit` or below within 20 s.
    static func settles(_ read: () -> Int, within limit: Int) -> Bool {
        let deadline = ContinuousClock.now + .seconds(20)
        while read() > limit {
            guard ContinuousClock.now < deadline else { return false }
            usleep(20_000)
        }
        return true
    }

    static func threadCount() -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task").count) ?? 0
    }

    static func fdCount() -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? 0
    }

    /// Spins for `milliseconds`; returns the loop thread's clock as it began and as it ended, read in its frame.
    @inline(never)
    static func computeFirstHalf(milliseconds: Int) -> (start: UInt64, end: UInt64) { timedSpin(milliseconds) }

    @inline(never)
    static func computeSecondHalf(milliseconds: Int) -> (start: UInt64, end: UInt64) { timedSpin(milliseconds) }

    @inline(never)
    static func timedSpin(_ milliseconds: Int) -> (start: UInt64, end: UInt64) {
        let start = sw_monotonic_ns()
        spin(milliseconds: milliseconds)
        return (start, sw_monotonic_ns())
    }

    @inline(never)
    static func spin(milliseconds: Int) {
        let end = DispatchTime.now().uptimeNanoseconds + UInt64(milliseconds) * 1_000_000
        var x: UInt64 = 1
        while DispatchTime.now().uptimeNanoseconds < end { x = x &* 6_364_136_223_846_793_005 &+ 1 }
        if x == 0 { print(x) }
    }

    /// Stands for a slow callout on the loop thread.
    @inline(never)
    static func blockLoopThread(milliseconds: Int) {
        let end = DispatchTime.now().uptimeNanoseconds + UInt64(milliseconds) * 1_000_000
        while DispatchTime.now().uptimeNanoseconds < end { usleep(1000) }
    }
}
