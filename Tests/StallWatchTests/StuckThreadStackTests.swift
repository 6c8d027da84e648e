// The stuck thread's stack in a stall's thread list when its first sample could not see it.
import CStallWatchCore
import Foundation
import StallWatchTestSupport
import Synchronization
import Testing

@testable import StallWatch

/// A sampler whose first `blind` samples find no stack (as for a thread working inside the kernel), and whose
/// later ones return a stack with the sample's index as its innermost address.
final class BlindFirstSampler: StackSampling {
    let blind: Int
    let count = Mutex(0)
    var captureMethod: CaptureMethod { "test" }

    init(blind: Int) { self.blind = blind }

    func sample(_ thread: SampledThread, configuration: StallWatchConfiguration) -> StackSample {
        let index = count.withLock { value in
            defer { value += 1 }
            return value
        }
        guard index >= blind else { return StackSample(error: "the thread did not stop", failure: "did not stop") }
        return StackSample(frames: [.programCounter(0x1000 + UInt64(index)), .returnAddress(0x2000)], pauseNanos: 1)
    }

    func sampleThread(id: Int32, configuration: StallWatchConfiguration) -> StackSample {
        StackSample(error: "not sampled in this test")
    }
}

/// A loop stuck in one phase on `thread` until the sampler has taken `samples` samples; it then turns once and ends.
struct StuckUntilSampled: ProgressSource {
    let sampler: BlindFirstSampler
    let thread: Int32
    let samples: Int
    let phaseStart = sw_monotonic_ns() &- 1_000_000_000

    init(sampler: BlindFirstSampler, thread: Int32, samples: Int) {
        self.sampler = sampler
        self.thread = thread
        self.samples = samples
    }

    var sampledThread: SampledThread? { SampledThread(threadID: thread, stackLow: 0, stackHigh: 0) }
    var annotations: [String: String] { [:] }

    private var turned = false

    mutating func read(now: UInt64) -> ProgressReading {
        guard !turned else { return .ended(reason: nil) }
        guard sampler.count.withLock({ $0 }) >= samples else {
            return .progress(LoopSnapshot(sequence: 1, activity: .afterWaiting, phaseStartNanos: phaseStart))
        }
        turned = true
        return .progress(LoopSnapshot(sequence: 2, activity: .beforeWaiting, phaseStartNanos: now))
    }

    func wait(for wait: StallDetector.Wait, nextSampleAt: UInt64?) -> Bool {
        while let due = nextSampleAt, sw_monotonic_ns() < due { sched_yield() }
        return true
    }
}

@Suite(.offPool) struct StuckThreadStackTests {
    /// Follows one stall of a loop on a parked thread of this process whose first `blind` samples have no stack.
    static func report(blind: Int, samples: Int, directory: String) throws -> StallReport {
        let parked = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let tid = Mutex<Int32>(0)
        let thread = Thread {
            tid.withLock { $0 = sw_gettid() }
            parked.signal()
            release.wait()
        }
        thread.start()
        parked.wait()
        defer { release.signal() }
        var configuration = StallWatchConfiguration()
        configuration.reportDirectory = directory
        configuration.maxThreads = 1
        configuration.symbolication = .off
        configuration.sampleIntervalMs = 2
        let sampler = BlindFirstSampler(blind: blind)
        let recorder = StallRecorder(
            configuration: configuration, loopName: "blind",
            target: .init(
                processID: getpid(), detectionSource: "test", sampler: sampler, process: ProcessIdentity.current,
                phaseKnown: true),
            emit: { _ in })
        var follower = StallFollower(
            source: StuckUntilSampled(sampler: sampler, thread: tid.withLock { $0 }, samples: samples),
            recorder: recorder, configuration: configuration.detectorConfiguration, watcher: .watchdog)
        #expect(follower.run(while: { true }) == .sourceEnded)
        recorder.flush()
        let reports = try Fixtures.reports(in: directory)
        try #require(reports.count == 1, "\(reports.map(\.id))")
        return reports[0]
    }

    @Test func aFirstSampleWithoutAStackIsStoodInForByTheFirstLaterSampleWithOne() throws {
        let directory = Fixtures.temporaryDirectory("blind-first-sample")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let report = try Self.report(blind: 2, samples: 4, directory: directory)
        #expect(report.samples.first?.frames.isEmpty == true, "\(report.samples.map(\.frames.count)) \(report.status)")
        let stuck = try #require(report.threads?.first)
        #expect(stuck.threadId == report.loop.threadId)
        // Sample 2 is the first with a stack: its innermost address is 0x1002.
        #expect(
            stuck.frames.first?.address == 0x1002,
            "\(report.samples.map(\.frames.count)) \(report.status) \(report.notes)")
        #expect(stuck.error == nil)
        #expect(
            report.notes.contains {
                $0.hasPrefix("the stuck thread's first sample has no stack") && $0.contains("sample 2")
            })
    }

    @Test func aStuckThreadNeverSeenKeepsAnEmptyStackAndItsError() throws {
        let directory = Fixtures.temporaryDirectory("blind-every-sample")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let report = try Self.report(blind: .max, samples: 3, directory: directory)
        let stuck = try #require(report.threads?.first)
        #expect(stuck.frames.isEmpty)
        #expect(stuck.error == "the thread did not stop")
        #expect(!report.notes.contains { $0.hasPrefix("the stuck thread's first sample has no stack") })
    }
}
