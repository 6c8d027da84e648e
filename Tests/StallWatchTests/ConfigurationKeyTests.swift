// Configuration keys that are easy to ignore by accident: each test fails if its key stops being honoured.
import Dispatch
import Foundation
import StallWatchTestSupport
import Testing

@testable import StallWatch

#if canImport(Glibc)
    import Glibc
#endif

@Suite(.offPool) struct ConfigurationKeyTests {
    @Test func loopNameNamesOnlyLoopsWithoutANameOfTheirOwn() throws {
        var config = StallWatchConfiguration()
        config.loopName = "checkout"
        #expect(config.name(of: try EventLoop(mainQueue: .disabled)) == "checkout")
        #expect(config.name(of: try EventLoop(name: "io", mainQueue: .disabled)) == "io")
        #expect(StallWatchConfiguration().name(of: try EventLoop(mainQueue: .disabled)) == "main")
    }

    @Test(.timeLimit(.minutes(3)))
    func aStallOfAnUnnamedLoopIsReportedUnderLoopName() throws {
        let directory = Fixtures.temporaryDirectory("loop-name")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let loop = try EventLoop(mainQueue: .disabled)
        var config = StallWatchConfiguration()
        config.thresholdMs = 100
        config.reportDirectory = directory
        config.heartbeat = false
        config.loopName = "checkout"
        let ended = DispatchSemaphore(value: 0)
        let names = Recorder<String>()
        let watchdog = Watchdog(loop: loop, configuration: config) { event in
            if case .ended(let report) = event {
                names.append(report.loop.name)
                ended.signal()
            }
        }
        try watchdog.start()
        _ = startLoopThread(loop)
        loop.perform { WatchdogTests.blockLoopThread(milliseconds: 300) }
        ended.wait()
        loop.stop()
        watchdog.stop()
        #expect(names.values == ["checkout"])
        let reports = try Fixtures.reports(in: directory)
        #expect(reports.map(\.loop.name) == ["checkout"])
    }

    @Test func metricsLabelAnUnnamedLoopWithLoopNameAsReportsDo() throws {
        var config = StallWatchConfiguration()
        config.loopName = "checkout"
        let metrics = StallMetrics(loops: [try EventLoop(mainQueue: .disabled)], configuration: config)
        metrics.watch(try EventLoop(name: "io", mainQueue: .disabled), configuration: config)
        let lines = metrics.exposition().split(separator: "\n")
        #expect(lines.contains("stallwatch_loop_transitions_total{loop=\"checkout\"} 0"))
        #expect(lines.contains("stallwatch_loop_transitions_total{loop=\"io\"} 0"))
        #expect(!lines.contains { $0.contains("loop=\"main\"") })
    }

    @Test func maxStackBytesAboveTheCaptureSlotIsRejectedWithTheReason() {
        let error = #expect(throws: StallWatchError.self) {
            try StallWatchConfiguration.load(environment: ["STALLWATCH_MAX_STACK_BYTES": "65537"])
        }
        #expect(
            error?.message
                == "environment variable STALLWATCH_MAX_STACK_BYTES: maxStackBytes = 65537 is invalid; expected an integer from 4096 to 65536 (the in-process capture slot holds 65536 bytes)"
        )
        #expect(StallWatchConfiguration.maxStackBytesLimit == SignalSampler.slotBytes)
    }
}

extension CaptureTests {
    @Suite(.offPool) struct MaxStackBytesTests {
        @Test func theSignalHandlerCopiesAtMostMaxStackBytes() throws {
            let sampler = try SignalSampler.shared()
            let target = SpinningChain(depth: 300)
            defer { target.stop() }
            let whole = try sampler.capture(target.sampled, timeout: .seconds(2)).get()
            try #require(whole.stack.count > 8192, "the chain's stack is only \(whole.stack.count) bytes")
            let bounded = try sampler.capture(target.sampled, timeout: .seconds(2), maxStackBytes: 4096).get()
            #expect(bounded.stack.count == 4096)
            #expect(bounded.notes.contains { $0.contains("truncated") })
            #expect(Array(bounded.stack.prefix(64)) == Array(whole.stack.prefix(64)))  // the innermost part
        }

        @Test func inProcessSamplingHonoursTheConfiguredBound() throws {
            let target = SpinningChain(depth: 300)
            defer { target.stop() }
            let sampling = SignalStackSampling(
                sampler: try SignalSampler.shared(), unwinder: try StackUnwinder(processID: getpid()))
            var config = StallWatchConfiguration()
            config.maxFrames = 1024
            let whole = sampling.sample(target.sampled, configuration: config)
            config.maxStackBytes = 4096
            let bounded = sampling.sample(target.sampled, configuration: config)
            try #require(whole.addresses.count > 300)
            // Frames whose stack lies past the copied 4 KiB cannot be unwound.
            #expect(bounded.addresses.count < whole.addresses.count)
        }
    }
}
