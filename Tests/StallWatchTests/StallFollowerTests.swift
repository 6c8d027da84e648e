// The stall-following driver over a scripted progress source: no loop thread, no signals, no sleeps.
import CStallWatchCore
import Foundation
import StallWatchTestSupport
import Synchronization
import Testing

@testable import StallWatch

/// Plays back a script of readings and logs what the follower asks of it; its waits return at once.
struct ScriptedSource: ProgressSource {
    enum Step {
        /// A busy phase with this sequence number, begun a second before the look.
        case busy(sequence: UInt64)
        /// The idle wait, with this sequence number.
        case idle(sequence: UInt64)
        case ended(reason: String?, notes: [String])
    }

    var script: [Step]
    var log: [String] = []

    var sampledThread: SampledThread? { nil }
    var annotations: [String: String] { ["request": "42"] }

    mutating func read(now: UInt64) -> ProgressReading {
        guard !script.isEmpty else { return .ended(reason: nil) }
        switch script.removeFirst() {
        case .busy(let sequence):
            log.append("read \(sequence)")
            return .progress(
                LoopSnapshot(sequence: sequence, activity: .afterWaiting, phaseStartNanos: now &- 1_000_000_000))
        case .idle(let sequence):
            log.append("read \(sequence)")
            return .progress(LoopSnapshot(sequence: sequence, activity: .beforeWaiting, phaseStartNanos: now))
        case .ended(let reason, let notes):
            log.append("read end")
            return .ended(reason: reason, notes: notes)
        }
    }

    mutating func wait(for wait: StallDetector.Wait, nextSampleAt: UInt64?) -> Bool {
        log.append("wait")
        return true
    }

    mutating func stallBegan() { log.append("began") }
    mutating func stallEnded() { log.append("ended") }
    mutating func noteCapture() { log.append("capture") }
}

/// The names of the stall events delivered, in order.
final class EventNames: Sendable {
    private let names = Mutex<[String]>([])
    func append(_ name: String) { names.withLock { $0.append(name) } }
    var all: [String] { names.withLock { $0 } }
}

@Suite(.offPool) struct StallFollowerTests {
    static func follower(_ script: [ScriptedSource.Step], directory: String, events: EventNames)
        -> StallFollower<ScriptedSource>
    {
        var configuration = StallWatchConfiguration()
        configuration.reportDirectory = directory
        configuration.maxThreads = 0
        configuration.symbolication = .off
        // One sample per stall: with the default 50 ms interval, a begin slowed by a loaded machine (the
        // provisional report's fsyncs) left a second sample due at once, and one more capture in the log.
        configuration.sampleIntervalMs = 60_000
        let recorder = StallRecorder(
            configuration: configuration, loopName: "scripted",
            target: .init(
                processID: getpid(), detectionSource: "test", sampler: nil, process: ProcessIdentity.current,
                phaseKnown: true),
            emit: { event in
                let name: String
                switch event {
                case .began: name = "began"
                case .sampled: name = "sampled"
                case .escalated: name = "escalated"
                case .ended(let report): name = "ended \(report.status)"
                case .lateWakeup: name = "late"
                case .reportFailed: name = "failed"
                case .heartbeatFailed: name = "heartbeat failed"
                }
                events.append(name)
            })
        return StallFollower(
            source: ScriptedSource(script: script), recorder: recorder,
            configuration: configuration.detectorConfiguration, watcher: .watchdog)
    }

    @Test func aBusyPhasePastTheThresholdIsFollowedToItsEnd() throws {
        let directory = Fixtures.temporaryDirectory("follower-end")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let events = EventNames()
        var follower = Self.follower(
            [ScriptedSource.Step.busy(sequence: 7), .idle(sequence: 8)], directory: directory, events: events)
        #expect(follower.run(while: { true }) == .sourceEnded)
        #expect(follower.source.log == ["read 7", "began", "capture", "wait", "read 8", "ended", "wait"])
        #expect(events.all == ["began", "sampled", "ended ended"])
        let reports = try Fixtures.reports(in: directory)
        #expect(reports.count == 1)
        #expect(reports.first?.status == .ended)
        #expect(reports.first?.loop.iteration == 7)
        #expect(reports.first?.annotations == ["request": "42"])
        #expect(reports.first?.detection.source == "test")
    }

    @Test func aSourceThatEndsDuringAStallFinishesItAsUnrecoveredWithItsNotes() throws {
        let directory = Fixtures.temporaryDirectory("follower-gone")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let events = EventNames()
        var follower = Self.follower(
            [
                ScriptedSource.Step.busy(sequence: 3),
                .ended(reason: "the watched thread exited", notes: ["the heartbeat was lost"]),
            ],
            directory: directory, events: events)
        #expect(follower.run(while: { true }) == .sourceEnded)
        #expect(events.all == ["began", "sampled", "ended unrecovered"])
        let report = try #require(try Fixtures.reports(in: directory).first)
        #expect(report.status == .unrecovered)
        #expect(Array(report.notes.suffix(2)) == ["the heartbeat was lost", "the watched thread exited"])
    }

    @Test func aStopBeforeTheFirstLookReadsNothing() {
        let directory = Fixtures.temporaryDirectory("follower-stop")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let events = EventNames()
        var follower = Self.follower([ScriptedSource.Step.busy(sequence: 1)], directory: directory, events: events)
        #expect(follower.run(while: { false }) == .stopped)
        #expect(follower.source.log.isEmpty)
        #expect(!follower.recorder.isFollowing)
    }
}
