// `stallwatch dump` of a service whose loops nothing names: the loops guessed from what the threads do.
import Foundation
import StallWatchTestSupport
import Testing

@testable import StallWatch
@testable import StallWatchSidecar

#if canImport(Glibc)
    import Glibc
#endif

@Suite(.offPool) struct DumpLoopGuessTests {
    /// `Fixtures/loop_group.c` built with symbols, once per test process.
    static let loopGroup = SidecarFixtures.builtC("loop_group.c")

    /// The thread ids a fixture printed after `label` (`LOOP <index> <tid>`: the last field).
    static func ids(_ output: String, _ label: String) -> [Int32] {
        output.split(separator: "\n").filter { $0.hasPrefix(label + " ") }.compactMap {
            $0.split(separator: " ").last.flatMap { Int32($0) }
        }
    }

    /// Arriving mid-incident at a service of three numbered event loops, one stuck on a lock its own helper thread
    /// keeps, with no `--tid`, `--threads` or heartbeat: the dump names the three loops — the stuck one by its
    /// number among the idle ones — and neither the main thread, parked on a condition variable, nor the helper,
    /// which carries the stuck loop's name because that loop started it.
    @Test(.timeLimit(.minutes(3)))
    func aStuckLoopOfAGroupIsGuessedByItsNumberAndShownFirstWithTheHolder() throws {
        let binary = try #require(Self.loopGroup, "cc could not build the fixture")
        let target = try Spawned(binary, ["3"])
        defer { kill(target.pid, SIGKILL) }
        try #require(target.waitFor("READY"), "target: \(target.stderr)")
        let loops = Self.ids(target.stdout, "LOOP")
        try #require(loops.count == 3, "\(target.stdout)")
        try #require(target.waitFor("STUCK"), "target: \(target.stdout) \(target.stderr)")
        let stuck = try #require(Self.ids(target.stdout, "STUCK").first)
        let helper = try #require(Self.ids(target.stdout, "HELPER").first)
        let pid = target.pid
        #expect(ProcessDumpTests.eventually { ThreadProbe.read(pid: pid, tid: stuck)?.syscallName == "futex" })

        let dump = try Spawned(ProcessDumpTests.stallwatch, ["dump", "-p", "\(pid)", "--json"])
        #expect(dump.wait() == 0, "dump: \(dump.stderr)")
        try ProcessDumpTests.expectValidDump(dump.stdout)
        let parsed = try ProcessDump.decode(Data(dump.stdout.utf8))
        #expect(parsed.loopThreadsGuessed == true)
        #expect(parsed.loopThreadIds == loops.sorted(), "main \(pid), helper \(helper)")
        let first = try #require(parsed.threads.first)
        #expect(first.snapshot.threadId == stuck && first.role == .loop && first.activity == .blocked)
        #expect(first.snapshot.waitingForThreadId == helper, "the lock's owner is named")
        #expect(first.snapshot.frames.contains { $0.symbol == "refresh_cache" }, "\(first.snapshot.frames)")
        let holder = try #require(parsed.threads.dropFirst().first)
        #expect(holder.snapshot.threadId == helper && holder.role == .lockOwner)
        let main = try #require(parsed.threads.first { $0.snapshot.threadId == pid })
        #expect(main.role == .other && main.activity == .idle)
        let state = SidecarFixtures.traceState(pid: pid)
        #expect(state?.tracer == "0" && state?.state != "t" && state?.state != "T", "\(String(describing: state))")
    }
}
