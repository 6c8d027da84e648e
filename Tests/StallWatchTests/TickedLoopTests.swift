// The two-call tick API: a loop of the test's own that says when it runs work and when it waits.
import Dispatch
import Foundation
import StallWatchTestSupport
import Synchronization
import Testing

@testable import StallWatch

@Suite(.offPool, .serialized) struct TickedLoopTests {
    /// A hand-written loop on a thread of its own: it waits on a semaphore for jobs (or a timeout), ticking
    /// `willWait()` before the wait and `willRunWork()` after it, and ends after `finish`.
    final class JobLoop: @unchecked Sendable {  // `jobs` is behind its Mutex; the rest are lets.
        let ticks: TickedLoop
        private let jobs = Mutex<[@Sendable () -> Bool]>([])
        private let available = DispatchSemaphore(value: 0)
        let finished = DispatchSemaphore(value: 0)

        /// - Parameter idleTimeoutMs: How long one wait lasts when no job comes (the loop's own timer).
        init(name: String, idleTimeoutMs: Int) {
            ticks = TickedLoop(name: name)
            let thread = Thread { [self] in
                var running = true
                while running {
                    ticks.willWait()
                    let woken = available.wait(timeout: .now() + .milliseconds(idleTimeoutMs)) == .success
                    ticks.willRunWork()
                    if woken, let job = jobs.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) { running = job() }
                }
                ticks.finish()
                finished.signal()
            }
            thread.name = "test-ticked"
            thread.start()
        }

        /// Runs `job` on the loop; the loop ends after a job that returns false.
        func submit(_ job: @escaping @Sendable () -> Bool) {
            jobs.withLock { $0.append(job) }
            available.signal()
        }
    }

    func configuration(_ directory: String) -> StallWatchConfiguration {
        var config = StallWatchConfiguration()
        config.thresholdMs = 100
        config.reportDirectory = directory
        config.heartbeat = false
        config.dedupWindowMs = 0
        return config
    }

    /// The culprit: CPU work between `willRunWork()` and `willWait()`.
    @inline(never)
    static func spinInTickedWork(milliseconds: Int) {
        let end = DispatchTime.now().uptimeNanoseconds + UInt64(milliseconds) * 1_000_000
        var x: UInt64 = 1
        while DispatchTime.now().uptimeNanoseconds < end { x = x &* 6_364_136_223_846_793_005 &+ 1 }
        #expect(x != 0)
    }

    @Test(.timeLimit(.minutes(3)))
    func aTickedLoopStuckInItsWorkIsOneReportNamingTheCulprit() throws {
        let directory = Fixtures.temporaryDirectory("ticked-stall")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let loop = JobLoop(name: "ticked", idleTimeoutMs: 10_000)
        let ended = DispatchSemaphore(value: 0)
        let events = Recorder<String>()
        let watchdog = Watchdog(loop: loop.ticks, configuration: configuration(directory)) { event in
            switch event {
            case .began: events.append("began")
            case .ended:
                events.append("ended")
                ended.signal()
            default: break
            }
        }
        try watchdog.start()
        defer { watchdog.stop() }
        for _ in 0..<20 { loop.submit { true } }  // short work items are not stalls
        loop.submit {
            Self.spinInTickedWork(milliseconds: 400)
            return true
        }
        #expect(ended.wait(timeout: .now() + 20) == .success)
        loop.submit { false }
        #expect(loop.finished.wait(timeout: .now() + 10) == .success)
        #expect(events.values == ["began", "ended"])
        let reports = try Fixtures.reports(in: directory)
        try #require(reports.count == 1, "\(reports.map(\.id))")
        let report = reports[0]
        #expect(report.loop.name == "ticked")
        #expect(report.status == .ended)
        #expect(report.detection.source == "in-process")
        #expect(report.durationMs >= 360 && report.durationMs <= 3000, "duration \(report.durationMs)")
        let point = report.pointStack?.frames.compactMap(\.symbol) ?? []
        #expect(
            point.contains { $0.contains("spinInTickedWork") },
            "\(point) \(report.capture.errors) \(report.samples.map(\.error))")
        #expect((loop.ticks.iterations ?? 0) >= 22)
        try Fixtures.expectReportsValidate(in: directory)
    }

    @Test(.timeLimit(.minutes(3)))
    func aTickedLoopIdlingInItsWaitIsNeverBlamed() throws {
        let directory = Fixtures.temporaryDirectory("ticked-idle")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // Each idle wait lasts three thresholds; the loop idles through several before it ends.
        let loop = JobLoop(name: "ticked-idle", idleTimeoutMs: 300)
        // What concerns the loop; a late wake-up of the watchdog's own thread (a loaded machine) says nothing of it.
        let events = Recorder<String>()
        let watchdog = Watchdog(loop: loop.ticks, configuration: configuration(directory)) { event in
            if case .lateWakeup = event { return }
            events.append("\(event)")
        }
        try watchdog.start()
        let waits = Atomic<Int>(0)
        let idledEnough = DispatchSemaphore(value: 0)
        // A job after each of three long idle waits, the last one ends the loop.
        @Sendable func again() {
            DispatchQueue.global().asyncAfter(deadline: .now() + 0.35) {
                loop.submit {
                    if waits.add(1, ordering: .relaxed).newValue < 3 {
                        again()
                        return true
                    }
                    idledEnough.signal()
                    return false
                }
            }
        }
        again()
        #expect(idledEnough.wait(timeout: .now() + 20) == .success)
        #expect(loop.finished.wait(timeout: .now() + 10) == .success)
        watchdog.stop()
        #expect(events.values.isEmpty, "\(events.values)")
        #expect(try Fixtures.reports(in: directory).isEmpty)
    }
}
