// Snapshots on demand: Watchdog.snapshot(reason:) writes the loop's lead-up as a report without a stall.
import CStallWatchCore
import Dispatch
import Foundation
import StallWatchTestSupport
import Testing

@testable import StallWatch

@Suite(.offPool, .serialized) struct LeadUpSnapshotTests {
    @Test(.timeLimit(.minutes(2)))
    func aSnapshotWritesTheLeadUpWithItsReasonAndNoStall() throws {
        let directory = Fixtures.temporaryDirectory("lead-up-snapshot")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let loop = try EventLoop(name: "snapshot", mainQueue: .disabled)
        var config = StallWatchConfiguration()
        config.reportDirectory = directory
        config.heartbeat = false
        let watchdog = Watchdog(loop: loop, configuration: config)
        try watchdog.start()
        let thread = startLoopThread(loop)
        defer {
            loop.stop()
            watchdog.stop()
            _ = thread
        }
        let done = DispatchSemaphore(value: 0)
        for index in 0..<6 {
            loop.perform(label: index == 3 ? "renderSessions" : "tick") {
                LeadUpIntegrationTests.spin(milliseconds: index == 3 ? 60 : 5)
            }
        }
        loop.perform { done.signal() }
        try #require(done.wait(timeout: .now() + .seconds(60)) == .success)
        let path = try watchdog.snapshot(reason: "request 42 was slow")
        let report = try ReportStore.load(path: path)
        #expect(report.status == .snapshot)
        #expect(report.snapshotReason == "request 42 was slow")
        #expect(report.durationMs == 0)
        #expect(report.cause == nil)
        let leadUp = try #require(report.leadUp)
        LeadUpIntegrationTests.expectTopItemsAreTheLongest(leadUp, including: "renderSessions")
        #expect(leadUp.items.filter { $0.label == "tick" }.count == 5)
        #expect(leadUp.stallStartMs == nil)
        #expect(!leadUp.patterns.contains(.longItemBefore))
        try Fixtures.expectReportsValidate(in: directory)
    }

    @Test func aSnapshotOfAStoppedWatchdogThrowsInvalidState() throws {
        let loop = try EventLoop(name: "snapshot-stopped", mainQueue: .disabled)
        let watchdog = Watchdog(loop: loop, configuration: StallWatchConfiguration())
        let error = #expect(throws: StallWatchError.self) { try watchdog.snapshot(reason: "none") }
        #expect(error?.code == .invalidState)
    }
}
