// The watchdog in this process: a healthy busy loop is never blamed; a stuck one is, once.
import Dispatch
import Foundation
import StallWatchTestSupport
import Synchronization
import Testing

@testable import StallWatch

@Suite(.serialized) struct WatchdogTests {
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
        let loop = EventLoop(name: "healthy", mainQueue: .disabled)
        let events = Recorder<String>()
        let watchdog = Watchdog(loop: loop, configuration: configuration(directory: directory)) {
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
        let loop = EventLoop(name: "stuck", mainQueue: .disabled)
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
        #expect(!blocking.isEmpty, "\(frames.compactMap(\.symbol))")
        // Debug builds carry DWARF: the frame has this file and a line in the function.
        #expect(blocking.contains { $0.file?.hasSuffix("WatchdogTests.swift") == true && ($0.line ?? 0) > 0 })
        try Fixtures.expectReportsValidate(in: directory)
    }

    @Test(.timeLimit(.minutes(3)))
    func stallSpentInTwoFunctionsShowsBothInTheCallTreeInProportion() throws {
        let directory = Fixtures.temporaryDirectory("two-functions")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let loop = EventLoop(name: "two-functions", mainQueue: .disabled)
        var config = configuration(directory: directory, thresholdMs: 100)
        config.sampleIntervalMs = 20
        // The all-thread snapshot at detection takes as long as the other threads of this test process (tests
        // running in parallel) take to answer: left out, so it cannot eat into the first function's samples.
        config.maxThreads = 0
        let ended = DispatchSemaphore(value: 0)
        let watchdog = Watchdog(loop: loop, configuration: config) { if case .ended = $0 { ended.signal() } }
        try watchdog.start()
        _ = startLoopThread(loop)
        loop.perform {
            WatchdogTests.computeFirstHalf(milliseconds: 600)
            WatchdogTests.computeSecondHalf(milliseconds: 600)
        }
        ended.wait()
        loop.stop()
        watchdog.stop()
        let report = try #require(try Fixtures.reports(in: directory).first)
        var counts: [String: Int] = [:]
        func visit(_ node: CallTree.Node) {
            for name in ["computeFirstHalf", "computeSecondHalf"] where node.frame.symbol?.contains(name) == true {
                counts[name, default: 0] += node.count
            }
            node.children.forEach(visit)
        }
        (report.callTree ?? []).forEach(visit)
        let first = try #require(counts["computeFirstHalf"])
        let second = try #require(counts["computeSecondHalf"])
        // Sampling starts at the threshold: 500 ms of the first function are sampled, 600 ms of the second.
        let expected = 500.0 / 600.0
        let ratio = Double(first) / Double(second)
        #expect(
            ratio > expected * 0.7 && ratio < expected * 1.3,
            "first \(first), second \(second) \(report.samples.map { "\(Int($0.offsetMs)):\($0.frames.count):\($0.error ?? "")" })"
        )
        let point = try #require(report.pointStack)
        #expect(point.frames.contains { $0.symbol?.contains("computeSecondHalf") == true })
        #expect(!point.frames.contains { $0.symbol?.contains("computeFirstHalf") == true })
    }

    @Test(.timeLimit(.minutes(3)))
    func classicStrategyDetectsTheSameStall() throws {
        let directory = Fixtures.temporaryDirectory("classic")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let loop = EventLoop(name: "classic", mainQueue: .disabled)
        var config = configuration(directory: directory, thresholdMs: 100)
        config.strategy = .classic
        let ended = DispatchSemaphore(value: 0)
        let watchdog = Watchdog(loop: loop, configuration: config) { if case .ended = $0 { ended.signal() } }
        try watchdog.start()
        _ = startLoopThread(loop)
        loop.perform { WatchdogTests.blockLoopThread(milliseconds: 400) }
        ended.wait()
        loop.stop()
        watchdog.stop()
        let reports = try Fixtures.reports(in: directory)
        try #require(reports.count == 1)
        #expect(reports[0].detection.strategy == .classic)
        #expect(reports[0].durationMs >= 360 && reports[0].durationMs <= 500)
    }

    @Test(.timeLimit(.minutes(3)))
    func aLoopCanHaveOnlyOneWatchdog() throws {
        let loop = EventLoop(name: "single", mainQueue: .disabled)
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

    @Test(.timeLimit(.minutes(2)))
    func startingAndStoppingAThousandTimesLeavesNoThreadsBehind() throws {
        let loop = EventLoop(name: "churn", mainQueue: .disabled)
        let directory = Fixtures.temporaryDirectory("churn")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let watchdog = Watchdog(loop: loop, configuration: configuration(directory: directory))
        let threadsBefore = Self.threadCount()
        let fdsBefore = Self.fdCount()
        for _ in 0..<1000 {
            try watchdog.start()
            watchdog.stop()
        }
        // Other suites start threads and open descriptors in parallel, for a while each; a leak would be one per
        // cycle (1,000) and would stay. So the counts are read again, for up to 20 s, until back within a margin.
        #expect(Self.settles(Self.threadCount, within: threadsBefore + 8), "threads: \(Self.threadCount())")
        #expect(Self.settles(Self.fdCount, within: fdsBefore + 16), "descriptors: \(Self.fdCount())")
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

    @inline(never)
    static func computeFirstHalf(milliseconds: Int) { spin(milliseconds: milliseconds) }

    @inline(never)
    static func computeSecondHalf(milliseconds: Int) { spin(milliseconds: milliseconds) }

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
