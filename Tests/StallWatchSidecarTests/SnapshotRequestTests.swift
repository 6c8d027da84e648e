// `stallwatch snapshot -p PID`: a lead-up report asked of a running demo through its heartbeat segment.
import Foundation
import StallWatch
import StallWatchTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite(.serialized) struct SnapshotRequestTests {
    static let demo = SidecarFixtures.executable("stallwatch-demo")
    static let cli = SidecarFixtures.executable("stallwatch")

    @Test(.timeLimit(.minutes(3)))
    func aSnapshotFromOutsideOfABusyLoopNamesItsTopItem() throws {
        let directory = SidecarFixtures.temporaryDirectory("snapshot")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let heartbeats = directory + "/shm"
        try FileManager.default.createDirectory(atPath: heartbeats, withIntermediateDirectories: false)
        // warmCaches (400 ms) ends, then stallOnCPU keeps the loop busy for 20 s, under a threshold it never
        // reaches: a busy loop, no stall.
        let target = try Spawned(
            Self.demo,
            [
                "stall", "--kind", "lead-up", "--duration-ms", "20000", "--threshold-ms", "60000", "--delay-ms",
                "100", "--report-dir", directory,
            ],
            environment: ["STALLWATCH_HEARTBEAT_DIRECTORY": heartbeats])
        defer { kill(target.pid, SIGKILL) }
        // Snapshots until one is taken inside stallOnCPU (an earlier one may come before warmCaches ended).
        var report: StallReport?
        var outputs: [String] = []
        for _ in 0..<15 where report?.leadUp?.inFlight?.label != "stallOnCPU" {
            let result = try Fixtures.run(
                Self.cli, ["snapshot", "-p", String(target.pid), "--heartbeat-dir", heartbeats],
                timeout: .seconds(30))
            outputs.append("\(result.status): \(result.stdout) \(result.stderr)")
            guard result.status == 0 else { continue }
            let path = result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            report = try ReportStore.load(path: path)
        }
        let snapshot = try #require(report, "\(outputs)")
        #expect(snapshot.status == .snapshot)
        #expect(snapshot.snapshotReason?.contains("stallwatch snapshot") == true)
        let leadUp = try #require(snapshot.leadUp)
        #expect(leadUp.inFlight?.label == "stallOnCPU", "\(outputs)")
        #expect(leadUp.topItems.first?.label == "warmCaches", "\(leadUp.topItems)")
        // Where the top item and the busy item ran, from the kernel's ring of the loop thread.
        let warm = leadUp.topItems.first?.stacks?.first?.frames ?? []
        #expect(warm.contains { $0.symbol?.contains("warmCaches") == true }, "\(warm.map { $0.symbol ?? "?" })")
        let busy = leadUp.inFlight?.stacks?.first?.frames ?? []
        #expect(busy.contains { $0.symbol?.contains("stallOnCPU") == true }, "\(busy.map { $0.symbol ?? "?" })")
        try Fixtures.expectReportsValidate(in: directory)
    }

    @Test(.timeLimit(.minutes(1)))
    func aSnapshotOfAProcessWithoutHeartbeatExitsSevenNamingIt() throws {
        let directory = SidecarFixtures.temporaryDirectory("snapshot-none")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let result = try Fixtures.run(
            Self.cli, ["snapshot", "-p", String(getpid()), "--heartbeat-dir", directory], timeout: .seconds(30))
        #expect(result.status == 7)
        #expect(result.stderr.contains("publishes no StallWatch heartbeat"), "\(result.stderr)")
    }
}
