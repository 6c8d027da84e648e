// The watchdog in this process: a healthy busy loop is never blamed; a stuck one is, once.
import Dispatch
import Foundation
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

    @Test(.timeLimit(.minutes(1)))
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

    @Test(.timeLimit(.minutes(1)))
    func stuckLoopIsReportedOnceWithTheExactDurationAndItsStack() throws {
        let directory = Fixtures.temporaryDirectory("stuck")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let loop = EventLoop(name: "stuck", mainQueue: .disabled)
        let ended = DispatchSemaphore(value: 0)
        let events = Recorder<String>()
        let watchdog = Watchdog(loop: loop, configuration: configuration(directory: directory, thresholdMs: 100)) { event in
            switch event {
            case .began: events.append("began")
            case .ended: events.append("ended"); ended.signal()
            case .sampled: events.append("sampled")
            default: events.append("\(event)")
            }
        }
        try watchdog.start()
        _ = startLoopThread(loop)
        loop.perform { WatchdogTests.blockLoopThread(milliseconds: 400) }
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
        let symbols = reports[0].samples.flatMap(\.frames).compactMap(\.symbol)
        #expect(symbols.contains { $0.contains("blockLoopThread") }, "\(symbols)")
        try Fixtures.expectReportsValidate(in: directory)
    }

    @Test(.timeLimit(.minutes(1)))
    func classicStrategyDetectsTheSameStall() throws {
        let directory = Fixtures.temporaryDirectory("classic")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let loop = EventLoop(name: "classic", mainQueue: .disabled)
        var config = configuration(directory: directory, thresholdMs: 100)
        config.strategy = "classic"
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
        #expect(reports[0].detection.strategy == "classic")
        #expect(reports[0].durationMs >= 360 && reports[0].durationMs <= 500)
    }

    @Test(.timeLimit(.minutes(1)))
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
        #expect(Self.threadCount() <= threadsBefore + 1)
        #expect(Self.fdCount() <= fdsBefore + 2)
    }

    static func threadCount() -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task").count) ?? 0
    }

    static func fdCount() -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? 0
    }

    /// Stands for a slow callout on the loop thread.
    @inline(never)
    static func blockLoopThread(milliseconds: Int) {
        let end = DispatchTime.now().uptimeNanoseconds + UInt64(milliseconds) * 1_000_000
        while DispatchTime.now().uptimeNanoseconds < end { usleep(1000) }
    }
}
