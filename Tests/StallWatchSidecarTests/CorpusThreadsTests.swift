// `stallwatch watch --threads GLOB`: several loop threads of one process, one detector each.
import Foundation
import StallWatch
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite struct CorpusThreadsTests {
    @Test(.timeLimit(.minutes(1)))
    func eachLoopThreadMatchingTheGlobIsWatchedAndTheReportNamesTheStalledOne() throws {
        let directory = SidecarFixtures.temporaryDirectory("threads")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let target = try Spawned(
            "/usr/bin/python3", [CorpusHarness.fixture("asyncio_service.py"), "two-loops", "1.0"])
        try #require(target.waitFor("READY"), "target: \(target.stderr)")
        let loops = ThreadProbe.threadIDs(pid: target.pid, nameMatching: "loop-*")
        #expect(loops.count == 2)
        let sidecar = try Spawned(
            SidecarFixtures.executable("stallwatch"),
            [
                "watch", "--pid", "\(target.pid)", "--threads", "loop-*", "--proc", "--threshold-ms", "250",
                "--report-dir", directory,
            ])
        #expect(target.wait(timeout: .seconds(30)) == 0, "target: \(target.stderr)")
        #expect(sidecar.wait(timeout: .seconds(10)) != nil, "the sidecar ends when its targets are gone")
        let watching = sidecar.stdout.split(separator: "\n").filter { $0.contains("\"watching\"") }
        #expect(watching.count == 2, "one watcher per matching thread: \(sidecar.stdout) \(sidecar.stderr)")
        let reports = SidecarFixtures.reports(in: directory)
        try #require(reports.count == 1, "\(reports.map { ($0.loop.name, $0.cause?.kind) })")
        #expect(reports[0].loop.name == "loop-b")
        #expect(loops.contains(reports[0].loop.threadId))
        #expect(reports[0].cause?.kind == .sleep)
    }

    @Test func aGlobMatchesThreadNamesOfAProcess() {
        let mine = ThreadProbe.threadIDs(pid: getpid(), nameMatching: "*")
        #expect(mine.contains(getpid()))
        #expect(ThreadProbe.threadIDs(pid: getpid(), nameMatching: "no-such-thread-[0-9]").isEmpty)
    }
}
