// The lead-up of the loops StallWatch watches besides its own: a TickedLoop's turns, a Foundation RunLoop's spans.
import CStallWatchCore
import CoreFoundation
import Dispatch
import Foundation
import StallWatchTestSupport
import Synchronization
import Testing

@testable import StallWatch

@Suite(.offPool, .serialized) struct LeadUpOtherLoopsTests {
    /// Watches `loop` (threshold 400 ms, lead-up on) while `drive` makes it stall in work annotated
    /// `request=stallOnCPU`, and returns that stall's report once it ended. A machine that holds the loop thread off
    /// its CPU past the threshold during an earlier turn makes that turn a stall of its own, rightly reported: such
    /// reports are allowed beside it, never a second one of the stuck work.
    func report(of loop: any WatchedLoop, _ drive: () -> Void) throws -> StallReport {
        let directory = Fixtures.temporaryDirectory("lead-up-loops")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var config = StallWatchConfiguration()
        config.thresholdMs = 400
        config.reportDirectory = directory
        config.leadUp = true
        let ended = DispatchSemaphore(value: 0)
        let watchdog = Watchdog(loop: loop, configuration: config) { event in
            if case .ended(let report) = event, report.annotations["request"] == "stallOnCPU" { ended.signal() }
        }
        try watchdog.start()
        drive()
        // Bounded: a stall never detected fails here rather than hanging the suite.
        let outcome = ended.wait(timeout: .now() + .seconds(90))
        watchdog.stop()
        try #require(outcome == .success, "no stall ended within 90 s")
        let reports = try Fixtures.reports(in: directory)
        let described = reports.map { "\(Int($0.durationMs)) ms, annotations \($0.annotations)" }
        let stalls = reports.filter { $0.annotations["request"] == "stallOnCPU" }
        try #require(stalls.count == 1, "\(described)")
        return stalls[0]
    }

    @Test(.timeLimit(.minutes(3)))
    func aTickedLoopsLongTurnBeforeTheStallIsATopItemNamedByTheAnnotationsSetWhileItRan() throws {
        let loop = TickedLoop(name: "ticked")
        let finished = DispatchSemaphore(value: 0)
        let report = try report(of: loop) {
            let thread = Thread {
                // Twenty short turns, then one of 200 ms (under the threshold) and the stuck one.
                for _ in 0..<20 {
                    loop.willWait()
                    usleep(1_000)
                    loop.willRunWork()
                    LeadUpIntegrationTests.spin(milliseconds: 2)
                }
                loop.willWait()
                usleep(5_000)
                loop.willRunWork()
                loop.annotate("request", "warmCaches")
                LeadUpIntegrationTests.spin(milliseconds: 200)
                loop.clearAnnotations()
                loop.willWait()
                usleep(5_000)
                loop.willRunWork()
                loop.annotate("request", "stallOnCPU")
                LeadUpIntegrationTests.spin(milliseconds: 900)
                loop.clearAnnotations()
                loop.willWait()
                loop.finish()
                finished.signal()
            }
            thread.start()
        }
        #expect(finished.wait(timeout: .now() + 30) == .success)
        let leadUp = try #require(report.leadUp)
        let warm = try #require(leadUp.items.last { $0.label == "request=warmCaches" }, "\(leadUp.items)")
        #expect(warm.durationMs >= 200)
        LeadUpIntegrationTests.expectTopItemsAreTheLongest(leadUp, including: "request=warmCaches")
        // The stuck turn is in flight under the turn's own label (annotated only once it ran), begun after the
        // warm-up ended.
        let stuck = try #require(leadUp.inFlight)
        #expect(stuck.label == "turn")
        #expect(warm.startMs + warm.durationMs <= stuck.startMs)
        #expect(leadUp.items.filter { $0.label == "turn" }.count == 20, "\(leadUp.items.map(\.label))")
        #expect(leadUp.patterns.contains(.longItemBefore))
    }

    @Test(.timeLimit(.minutes(3)))
    func aRunLoopsLongBlockBeforeTheStallIsATopItemAndTheStuckOneIsInFlightUnderItsPhase() throws {
        let runLoop = LoopAdapterTests.RunLoopThread()
        defer { runLoop.stop.store(true, ordering: .releasing) }
        let monitor = FoundationRunLoopMonitor(cfRunLoop: runLoop.cfRunLoop, name: "foundation")
        monitor.start()
        defer { monitor.stop() }
        let report = try report(of: monitor) {
            // Two blocks, as two requests would come: the first annotates itself and stays under the threshold.
            runLoop.perform {
                monitor.annotate("request", "warmCaches")
                LeadUpIntegrationTests.spin(milliseconds: 200)
                monitor.clearAnnotations()
                runLoop.perform {
                    monitor.annotate("request", "stallOnCPU")
                    LeadUpIntegrationTests.spin(milliseconds: 900)
                    monitor.clearAnnotations()
                }
            }
        }
        let leadUp = try #require(report.leadUp)
        let warm = try #require(leadUp.items.last { $0.label == "request=warmCaches" }, "\(leadUp.items)")
        #expect(warm.durationMs >= 200)
        LeadUpIntegrationTests.expectTopItemsAreTheLongest(leadUp, including: "request=warmCaches")
        // CFRunLoopPerformBlock's blocks run after `beforeSources`, or after a wake-up with the port sources.
        let stuck = try #require(leadUp.inFlight)
        #expect(["blocks and sources", "timers, ports and main queue"].contains(stuck.label), "\(stuck.label)")
        #expect(warm.startMs + warm.durationMs <= stuck.startMs)
    }

    @Test(.timeLimit(.minutes(3)))
    func aSnapshotOfATickedLoopNamesItsLongestTurn() throws {
        let directory = Fixtures.temporaryDirectory("lead-up-snapshot")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let loop = TickedLoop(name: "ticked")
        var config = StallWatchConfiguration()
        config.thresholdMs = 2_000
        config.reportDirectory = directory
        let watchdog = Watchdog(loop: loop, configuration: config)
        try watchdog.start()
        defer { watchdog.stop() }
        let turned = DispatchSemaphore(value: 0)
        Thread {
            for index in 0..<5 {
                loop.willWait()
                usleep(2_000)
                loop.willRunWork()
                if index == 2 { loop.annotate("request", "slowQuery") }
                LeadUpIntegrationTests.spin(milliseconds: index == 2 ? 120 : 10)
                loop.clearAnnotations()
            }
            loop.willWait()
            loop.finish()
            turned.signal()
        }.start()
        #expect(turned.wait(timeout: .now() + 30) == .success)
        let path = try watchdog.snapshot(reason: "slow request")
        let report = try ReportStore.load(path: path)
        #expect(report.status == .snapshot)
        let leadUp = try #require(report.leadUp)
        LeadUpIntegrationTests.expectTopItemsAreTheLongest(leadUp, including: "request=slowQuery")
        #expect(leadUp.inFlight == nil)
    }
}
