// The recorder's report writes: the provisional report off the watching thread, the final one always last.
import CStallWatchCore
import Dispatch
import Foundation
import StallWatchTestSupport
import Testing

@testable import StallWatch

@Suite(.offPool) struct StallRecorderWritesTests {
    static func recorder(directory: String, events: EventNames) -> StallRecorder {
        var configuration = StallWatchConfiguration()
        configuration.reportDirectory = directory
        configuration.maxThreads = 0
        configuration.symbolication = .off
        return StallRecorder(
            configuration: configuration, loopName: "writes",
            target: .init(
                processID: getpid(), detectionSource: "test", sampler: nil, process: ProcessIdentity.current,
                phaseKnown: true),
            emit: { event in
                switch event {
                case .began: events.append("began")
                case .ended(let report): events.append("ended \(report.status)")
                case .reportFailed: events.append("failed")
                default: break
                }
            })
    }

    /// The report files in `directory`.
    static func reportPaths(in directory: String) -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return names.filter { $0.hasSuffix(".json") }.sorted().map { directory + "/" + $0 }
    }

    static func stall(startNanos: UInt64) -> StallDetector.Stall {
        StallDetector.Stall(
            sequence: 7, activity: .beforeSources, startNanos: startNanos, detectedNanos: startNanos + 250_000_000,
            latencyNanos: 0, isHang: false, notes: [])
    }

    @Test(.timeLimit(.minutes(3)))
    func theFirstReportIsWrittenOffTheWatchingThreadAndTheFinalOneLandsLast() throws {
        let directory = Fixtures.temporaryDirectory("recorder-writes")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let events = EventNames()
        let recorder = Self.recorder(directory: directory, events: events)
        // A disk that does not answer: the writes queue holds every write.
        recorder.writes.suspend()
        let now = sw_monotonic_ns()
        recorder.begin(Self.stall(startNanos: now - 250_000_000), thread: nil, annotations: [:], now: now)
        // The watching thread went on at once: the stall began, its report is not on disk yet.
        #expect(events.all == ["began"])
        #expect(Self.reportPaths(in: directory).isEmpty)
        // The end queues the final report behind the write queued before it (off the watching thread too).
        let ended = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            recorder.end(endNanos: sw_monotonic_ns())
            ended.signal()
        }
        recorder.writes.resume()
        #expect(ended.wait(timeout: .now() + 20) == .success)
        recorder.flush()
        // One file, the final report: the provisional one did not land over it.
        let paths = Self.reportPaths(in: directory)
        try #require(paths.count == 1, "\(paths)")
        #expect(try ReportStore.load(path: paths[0]).status == .ended)
        #expect(events.all == ["began", "ended ended"])
    }
}
