// A target that dies in the middle of a stall still gets a symbolicated final report from the sidecar.
import Foundation
import StallWatchTestSupport
import Testing

@testable import StallWatch
@testable import StallWatchSidecar

@Suite(.offPool, .serialized) struct SidecarTargetDeathTests {
    @Test(.timeLimit(.minutes(3)))
    func aTargetKilledMidStallLeavesAReportWhoseFramesCarrySymbolsAndImages() throws {
        let directory = SidecarFixtures.temporaryDirectory("dies")
        let shm = SidecarFixtures.temporaryDirectory("dies-shm")
        defer {
            try? FileManager.default.removeItem(atPath: directory)
            try? FileManager.default.removeItem(atPath: shm)
        }
        let demo = try Spawned(
            SidecarFixtures.executable("stallwatch-demo"),
            [
                "stall", "--kind", "cpu", "--duration-ms", "20000", "--threshold-ms", "200", "--delay-ms", "800",
                "--no-watchdog", "--report-dir", directory,
            ], environment: ["STALLWATCH_HEARTBEAT_DIRECTORY": shm])
        for _ in 0..<200 where HeartbeatReader.segmentFiles(in: shm).isEmpty { usleep(10_000) }
        var configuration = StallWatchConfiguration()
        configuration.reportDirectory = directory
        configuration.thresholdMs = 200
        var options = TargetWatcher.Options(pid: demo.pid, configuration: configuration)
        options.thresholdFixed = true
        options.heartbeatDirectory = shm
        let (watcher, events, done, _) = try SidecarIntegrationTests.watch(options, checkEachCapture: false)
        defer { watcher.stop() }
        // The stall is followed (a provisional report is on disk); then the target dies without warning.
        let deadline = ContinuousClock.now + .seconds(20)
        while SidecarFixtures.reports(in: directory).isEmpty && ContinuousClock.now < deadline { usleep(10_000) }
        try #require(!SidecarFixtures.reports(in: directory).isEmpty, "no provisional report")
        usleep(500_000)
        kill(demo.pid, SIGKILL)
        #expect(done.wait(timeout: .now() + 20) == .success, "\(events.withLock { $0 })")

        let report = try #require(SidecarFixtures.reports(in: directory).first)
        #expect(report.status != .ongoing, "the final report replaced the provisional one")
        #expect(!report.images.isEmpty, "images kept after the target exited")
        let frames = report.samples.flatMap(\.frames)
        #expect(frames.contains { $0.symbol?.contains("Stalls.stallOnCPU") == true })
        #expect(frames.contains { $0.image != nil })
    }
}
