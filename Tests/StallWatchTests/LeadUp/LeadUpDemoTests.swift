// The demo's lead-up kind: a stall whose report shows the long item that ran just before it.
import Foundation
import StallWatchTestSupport
import Testing

@testable import StallWatch

@Suite(.offPool, .serialized) struct LeadUpDemoTests {
    static let demo = Fixtures.executable("stallwatch-demo")

    @Test(.timeLimit(.minutes(3)))
    func theLeadUpDemosReportPutsWarmCachesFirstAmongTheItemsBeforeTheStall() throws {
        let directory = Fixtures.temporaryDirectory("lead-up-demo")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let result = try Fixtures.run(
            Self.demo, ["stall", "--kind", "lead-up", "--delay-ms", "300", "--report-dir", directory],
            timeout: .seconds(90))
        #expect(result.status == 0, "demo failed: \(result.stderr)")
        // A loaded machine may stretch warmCaches past the threshold into a report of its own: the stall of the
        // demo is the one stuck in stallOnCPU.
        let reports = try Fixtures.reports(in: directory)
        let report = try #require(
            reports.first { $0.leadUp?.inFlight?.label == "stallOnCPU" },
            "\(reports.map { ($0.id, $0.leadUp?.inFlight?.label) })")
        #expect(report.detection.thresholdMs == 500)
        let leadUp = try #require(report.leadUp)
        #expect(leadUp.topItems.first?.label == "warmCaches", "\(leadUp.topItems)")
        // warmCaches' stack, from the kernel's ring (the demo runs as root here; an unprivileged user gets the same
        // ring: the test below).
        #expect(leadUp.stackSource?.method == "perf-clock", "\(String(describing: leadUp.stackSource))")
        let warmStack = try #require(leadUp.topItems.first?.stacks?.first, "warmCaches has no stacks")
        #expect(warmStack.frames.contains { $0.symbol?.contains("warmCaches") == true })
        let warm = try #require(leadUp.items.last { $0.label == "warmCaches" })
        #expect(warm.durationMs >= 400)
        let stuck = try #require(leadUp.inFlight)
        #expect(warm.startMs + warm.durationMs <= stuck.startMs)
        #expect(leadUp.patterns.contains(.longItemBefore))
        #expect(report.samples.contains { $0.frames.contains { $0.symbol?.contains("stallOnCPU") == true } })
        try Fixtures.expectReportsValidate(in: directory)
    }

    /// The same demo run by `nobody`: `perf_event_paranoid` 2 lets a process open software events on its own threads
    /// unprivileged, within the locked-memory budget, so the ring is the kernel's there too. Needs root to run as
    /// `nobody` (``OtherUserExecutable``).
    @Test(.timeLimit(.minutes(3)))
    func anUnprivilegedDemoGetsWarmCachesStackFromTheKernelsRing() throws {
        let demo = try OtherUserExecutable("stallwatch-demo")
        let directory = demo.directory + "/reports"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        chmod(directory, 0o777)
        let result = try Fixtures.run(
            "/usr/sbin/runuser",
            [
                "-u", demo.user, "--", demo.path, "stall", "--kind", "lead-up", "--delay-ms", "300", "--report-dir",
                directory,
            ],
            timeout: .seconds(90))
        #expect(result.status == 0, "demo failed: \(result.stderr)")
        let reports = try Fixtures.reports(in: directory)
        let report = try #require(reports.first { $0.leadUp?.inFlight?.label == "stallOnCPU" })
        // Written by the demo as nobody, not by root.
        let owners = try FileManager.default.contentsOfDirectory(atPath: directory).map { name in
            try FileManager.default.attributesOfItem(atPath: directory + "/" + name)[.ownerAccountID] as? Int
        }
        #expect(!owners.isEmpty && owners.allSatisfy { $0 != 0 }, "\(owners)")
        let leadUp = try #require(report.leadUp)
        #expect(leadUp.stackSource?.method == "perf-clock", "\(String(describing: leadUp.stackSource))")
        let warm = try #require(leadUp.topItems.first { $0.label == "warmCaches" })
        #expect(warm.stacks?.first?.frames.contains { $0.symbol?.contains("warmCaches") == true } == true)
    }
}
