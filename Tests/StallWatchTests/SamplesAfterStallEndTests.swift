// A stall's end against its samples' capture times: what was captured after the loop left the stall is not its.
import CStallWatchCore
import Foundation
import StallWatchTestSupport
import Synchronization
import Testing

@testable import StallWatch

/// Gives each sample the moment it was taken as its capture time, and keeps those moments.
final class ClockedSampler: StackSampling {
    let captures = Mutex<[UInt64]>([])
    var captureMethod: CaptureMethod { "test" }

    func sample(_ thread: SampledThread, configuration: StallWatchConfiguration) -> StackSample {
        let now = sw_monotonic_ns()
        captures.withLock { $0.append(now) }
        var sample = StackSample(frames: [.programCounter(0x1000), .returnAddress(0x2000)], pauseNanos: 1_000)
        sample.capturedAtNanos = now
        return sample
    }
}

/// A loop stuck in one phase until `samples` captures were taken, which then records that it left the stall at
/// the moment of capture `endAtCapture` (the loop's own record of its end, as `stallEndNanos`).
struct EndRecordingSource: ProgressSource {
    let sampler: ClockedSampler
    let samples: Int
    let endAtCapture: Int
    let phaseStart: UInt64
    /// The thread's schedule at the phase's start, as a source that reads it gives it.
    var phaseStartSchedule: ThreadSchedule?
    private var endReported = false

    init(sampler: ClockedSampler, samples: Int, endAtCapture: Int) {
        self.sampler = sampler
        self.samples = samples
        self.endAtCapture = endAtCapture
        phaseStart = sw_monotonic_ns() &- 1_000_000_000
    }

    var sampledThread: SampledThread? { SampledThread(threadID: sw_gettid(), stackLow: 0, stackHigh: 0) }
    var annotations: [String: String] { [:] }

    mutating func read(now: UInt64) -> ProgressReading {
        guard !endReported else { return .ended(reason: nil) }
        let captures = sampler.captures.withLock { $0 }
        guard captures.count >= samples else {
            return .progress(LoopSnapshot(sequence: 1, activity: .afterWaiting, phaseStartNanos: phaseStart))
        }
        endReported = true
        return .progress(
            LoopSnapshot(sequence: 2, activity: .beforeWaiting, phaseStartNanos: now),
            stallEndNanos: captures[endAtCapture])
    }

    /// Returns when the next sample is due, on the clock the recorder schedules it by.
    func wait(for wait: StallDetector.Wait, nextSampleAt: UInt64?) -> Bool {
        while let due = nextSampleAt, sw_monotonic_ns() < due { sched_yield() }
        return true
    }
}

@Suite(.offPool) struct SamplesAfterStallEndTests {
    /// Follows one stall of `source` to its end and returns its final report.
    static func report(of source: EndRecordingSource, directory: String) throws -> StallReport {
        var configuration = StallWatchConfiguration()
        configuration.reportDirectory = directory
        configuration.maxThreads = 0
        configuration.symbolication = .off
        configuration.sampleIntervalMs = 2
        let recorder = StallRecorder(
            configuration: configuration, loopName: "clocked",
            target: .init(
                processID: getpid(), detectionSource: "test", sampler: source.sampler,
                process: ProcessIdentity.current, phaseKnown: true),
            emit: { _ in })
        var follower = StallFollower(
            source: source, recorder: recorder, configuration: configuration.detectorConfiguration,
            watcher: .watchdog)
        #expect(follower.run(while: { true }) == .sourceEnded)
        recorder.flush()
        let reports = try Fixtures.reports(in: directory)
        try #require(reports.count == 1, "\(reports.map(\.id))")
        return reports[0]
    }

    @Test func samplesCapturedAtOrAfterTheLoopsRecordedEndAreLeftOutWithANote() throws {
        let directory = Fixtures.temporaryDirectory("samples-after-end")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let sampler = ClockedSampler()
        let source = EndRecordingSource(sampler: sampler, samples: 3, endAtCapture: 1)
        let report = try Self.report(of: source, directory: directory)
        let captures = sampler.captures.withLock { $0 }
        try #require(captures.count == 3)
        let ms = { (time: UInt64) in Double(time &- source.phaseStart) / 1e6 }
        // The first capture came before the end; the second (at the end) and the third are the loop after it.
        #expect(report.samples.count == 1, "\(report.samples.map(\.offsetMs)) for captures \(captures.map(ms))")
        // A sample's offset is its capture's moment, to the report's two decimals.
        #expect(abs((report.samples.first?.offsetMs ?? -1) - ms(captures[0])) <= 0.01)
        #expect(abs(report.durationMs - ms(captures[1])) <= 0.01, "\(report.durationMs) vs \(ms(captures[1]))")
        #expect(report.notes.contains("2 of 3 samples were captured after the stall ended and are left out"))
    }

    @Test func aStallWhoseEverySampleCameAfterItsEndSaysItWasNotSampled() throws {
        let directory = Fixtures.temporaryDirectory("samples-all-after-end")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let sampler = ClockedSampler()
        let report = try Self.report(
            of: EndRecordingSource(sampler: sampler, samples: 2, endAtCapture: 0), directory: directory)
        #expect(report.samples.isEmpty)
        #expect(report.cause?.kind == .unknown)
        #expect(report.cause?.evidence.first?.hasPrefix("not sampled") == true, "\(String(describing: report.cause))")
        #expect(report.notes.contains("2 of 2 samples were captured after the stall ended and are left out"))
    }

    /// With the thread's schedule from the stall's start, a stall with no sample of its own still has the kernel's
    /// figures over it: here the thread ran (this test's thread, spinning) and did not wait for a CPU, so the cause
    /// stays unknown, with the figures that say so.
    @Test func aStallNotSampledKeepsTheThreadsFiguresFromItsStart() throws {
        let directory = Fixtures.temporaryDirectory("samples-all-after-end-figures")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var source = EndRecordingSource(sampler: ClockedSampler(), samples: 2, endAtCapture: 0)
        let now = sw_monotonic_ns()
        let schedule = try #require(ProcDirectory.current.thread(sw_gettid()).schedstat(now: now))
        source.phaseStartSchedule = schedule
        let report = try Self.report(of: source, directory: directory)
        #expect(report.samples.isEmpty)
        #expect(report.cause?.kind == .unknown)
        #expect(report.cause?.evidence.first?.hasPrefix("not sampled") == true)
        let figures = report.cause?.evidence.first { $0.hasPrefix("from the stall's start") }
        #expect(figures != nil, "\(String(describing: report.cause))")
    }
}
