// Runs `stallwatch-demo stall --loop concurrency` for each kind and checks the pool reports it leaves.
import Foundation
import StallWatchTestSupport
import Testing

@testable import StallWatch

// In the pool watchdog's serialized suite: its in-process tests spin and block both cores' pool workers, which
// would make the demo's own watchdog wake late (and rightly decline to judge).
extension ConcurrencyWatchdogTests {
    /// Each kind, the function the demo blocks in, and its cause (a buffered write to disk is CPU work in the page
    /// cache as much as I/O: `io` may be either).
    static let demoKinds: [(kind: String, function: String, causes: Set<StallReport.Cause.Kind>)] = [
        ("cpu", "stallOnCPU", [.cpu]), ("sleep", "stallInSleep", [.sleep]), ("lock", "stallOnLock", [.lock]),
        ("io", "stallOnDiskIO", [.io, .cpu]),
    ]

    /// The reports, how long the stall ran by the demo's own clock, and how long its thread waited for a CPU from
    /// the stall's start to the report.
    func runPoolDemo(kind: String, directory: String) throws -> (
        reports: [StallReport], ranMs: Double, runQueueMs: Double?
    ) {
        let result = try Fixtures.run(
            Fixtures.executable("stallwatch-demo"),
            [
                "stall", "--loop", "concurrency", "--kind", kind, "--duration-ms", "750", "--threshold-ms", "200",
                "--delay-ms", "200", "--report-dir", directory, "--no-heartbeat",
            ])
        #expect(result.status == 0, "demo failed: \(result.stderr) \(result.stdout)")
        try Fixtures.expectReportsValidate(in: directory)
        let ran = try #require(
            Fixtures.demoStallsRanMs(result.stderr).first,
            "the demo did not say how long its stall ran: \(result.stderr)")
        return (try Fixtures.reports(in: directory), ran, Fixtures.demoStallThreadRunQueueMs(result.stderr))
    }

    /// The demo runs as a process of its own. (It used to time out now and then: its handler yields before it
    /// blocks, so the blocking job starts just as the job before it ends and wakes the watchdog, which then parked
    /// through the stall; see the per-shape test.)
    @Test(.timeLimit(.minutes(5)), arguments: 0..<demoKinds.count)
    func aBlockingAsyncFunctionIsOneReportOfItsWorkerWithTheTaskAndTheCause(_ index: Int) throws {
        let (kind, function, causes) = Self.demoKinds[index]
        let directory = Fixtures.temporaryDirectory("demo-pool-\(kind)")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let (reports, ranMs, runQueue) = try runPoolDemo(kind: kind, directory: directory)
        let runQueueMs = try #require(runQueue, "the demo did not say how long its stall's thread waited for a CPU")
        try #require(reports.count == 1, "\(kind): \(reports.map(\.id))")
        let report = reports[0]
        #expect(report.detection.source == "concurrency-pool")
        #expect(report.status == .ended)
        #expect(report.task?.id != nil)
        #expect(report.task?.name == "demo-\(kind)")
        #expect(
            report.cause.map { cause in causes.contains { cause.matches($0) } } == true,
            "\(kind): \(String(describing: report.cause))")
        // The job's own duration, against the stall as the demo timed it (the disk kind's last `fsync` may end
        // well after the 750 ms it writes for); the job's work around the stall may wait for a CPU on a loaded
        // machine (the thread's own figure).
        let interval = Double(report.capture.sampleIntervalMs)
        #expect(ranMs >= 750, "the demo's stall ran \(ranMs) ms")
        #expect(report.durationMs >= ranMs - interval, "\(report.durationMs) vs \(ranMs)")
        #expect(
            report.durationMs <= ranMs + interval + runQueueMs,
            "\(report.durationMs) vs \(ranMs), its thread waiting \(runQueueMs) ms for a CPU")
        // Alone ≤ 10 ms; the demo shares the machine with the other suites.
        #expect(report.detection.latencyMs <= 250, "\(kind): detected \(report.detection.latencyMs) ms late")
        #expect(report.samples.contains { $0.frames.contains { $0.symbol?.contains(function) == true } }, "\(kind)")
        // The awaiting callers above the blocking handler, marked async, read back from the file (version 2)
        // and through version 1 alike.
        let awaiting = { (report: StallReport) in
            report.samples.contains { sample in
                sample.frames.contains { $0.kind == .async && $0.symbol?.contains("PoolStalls.start") == true }
            }
        }
        #expect(awaiting(report), "\(kind): no async frame of the task's closure")
        let version1 = try ReportStore.decode(report.expandedJSON()).get()
        #expect(version1.samples.map { $0.frames.map(\.kind) } == report.samples.map { $0.frames.map(\.kind) })
    }

    @Test(.timeLimit(.minutes(2)))
    func saturatingThePoolIsOneSaturatedReportListingEveryWorker() throws {
        let directory = Fixtures.temporaryDirectory("demo-pool-saturate")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let reports = try runPoolDemo(kind: "saturate", directory: directory).reports
        let saturated = reports.filter { $0.cause?.kind == .saturated }
        try #require(saturated.count == 1, "\(reports.map { ($0.id, $0.cause?.kind) })")
        let workers = ProcessInfo.processInfo.activeProcessorCount
        #expect(saturated[0].pool?.workers.count == workers)
        for worker in saturated[0].pool?.workers ?? [] {
            #expect(worker.task.name?.hasPrefix("demo-saturate-") == true, "\(worker.task)")
            #expect(worker.frames.contains { $0.symbol?.contains("stallInSleep") == true }, "\(worker.frames)")
        }
        #expect(reports.count == workers + 1, "one report per stuck worker and one for the pool")
    }
}
