// One long write and fsync of one file, watched from outside: one stall, and the target not traced after it.
import Foundation
import StallWatchTestSupport
import Testing

@testable import StallWatch

/// A CPython asyncio service that saves a large document the simple way in one of its callbacks: one `write()` of
/// 512 MiB (copied into the page cache, "running" in /proc throughout), then flush, `fsync` (mostly in state D)
/// and close (`Fixtures/corpus/asyncio_service.py`, mode `save-document`). Run ten times: each run must give
/// exactly one report, whatever the disk and the load, judged on the service's own clock. Slow: each run takes
/// three seconds or more.
@Suite(.offPool, .serialized) struct CorpusFileWorkTests {
    /// The document's size. Copying 512 MiB into the page cache alone takes well over a threshold on any machine
    /// (memory copies run at a few GiB/s at most), so the work always lasts long enough to be judged.
    static let mebibytes = 512
    static let thresholdMs = 100

    @Test(.timeLimit(.minutes(3)), arguments: 1...10)
    func aLongWriteAndFsyncIsOneStallAndTheTargetIsNotTracedAfterIt(run: Int) throws {
        // The document goes next to the test's other files; the reports to tmpfs (the sidecar's own fsync of a
        // report on the same disk would wait behind the service's sync).
        let directory = SidecarFixtures.temporaryDirectory("save-document")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let c = CorpusCase(
            name: "python saves a \(Self.mebibytes) MiB document (run \(run))",
            command: CorpusPythonTests.python("save-document", "\(Self.mebibytes)"), expect: .stall(.io, frames: []),
            thresholdMs: Self.thresholdMs, evidenceContains: "in I/O", environment: ["TMPDIR": directory],
            reportParent: "/dev/shm", monitorTracing: true)
        let seen = try CorpusHarness.observe(c)
        // The service's own clock, each time read just after the call it follows: when the save started, its write
        // ended, its fsync ended (just before the close) and its close ended.
        let times = try #require(
            seen.targetStdout.split(separator: "\n").first { $0.hasPrefix("SAVED ") }?.split(separator: " ")
                .dropFirst().compactMap { UInt64($0) }, "the service did not say when it saved: \(seen.targetStdout)")
        try #require(times.count == 4)
        let (started, written, synced, closed) = (times[0], times[1], times[2], times[3])
        let workMs = Int((closed - started) / 1_000_000)
        try #require(
            workMs >= 2 * Self.thresholdMs, "the save took \(workMs) ms: too short to judge one stall of it")
        try CorpusHarness.judge(c, seen)
        // The one report spans the whole save: it began before the write ended (the write was not taken for
        // progress, nor its completion before the fsync) and lasted past the fsync, into the close. (A loaded
        // machine may also hold the idle loop off the CPU before the save: that report, `starved`, is not this one.)
        let report = try #require(seen.reports.blamingTheProgram(expecting: .io).first)
        let begin = UInt64(report.startedAt.timeIntervalSince1970 * 1e9)
        let end = UInt64((report.endedAt ?? .distantPast).timeIntervalSince1970 * 1e9)
        let ms: UInt64 = 1_000_000  // dates in reports have millisecond precision
        #expect(begin <= written + ms, "the stall began \((begin - written) / ms) ms after the write ended")
        // The end is the look that saw the thread move on, timed when that look began: known within one poll
        // (the watcher polls every threshold / 5), and the look's reads of /proc take milliseconds on a busy machine.
        let poll = UInt64(Self.thresholdMs / 5) * ms
        #expect(end + poll >= synced, "the stall ended \((synced - end) / ms) ms before the fsync did")
        // Never traced outside a stall: nothing is captured once the sidecar saw a stall's end, until another
        // begins (a loaded machine may hold the idle loop off the CPU after the save: a `starved` stall of its own,
        // sampled too). Each stall runs from its start to the moment its end was told. (That a thread which cannot
        // stop is never held seized is checked on the capture itself, in PtraceSamplerTests.)
        let windows = try seen.reports.map { stall in
            let told = try #require(seen.endedAt[stall.id], "no end was told for \(stall.id): \(seen.events)")
            return (UInt64(stall.startedAt.timeIntervalSince1970 * 1e9) - ms, told)
        }
        let outside = seen.tracedSpans.filter { span in
            !windows.contains { span.first >= $0.0 && span.last <= $0.1 }
        }
        #expect(
            outside.isEmpty,
            "traced outside every stall: \(outside); stalls \(windows); \(seen.reports.map(CorpusHarness.describe))")
    }
}
