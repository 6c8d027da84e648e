// `stallwatch watch --threads GLOB` and `daemon --threads`: several loop threads of one process, one detector each.
import Foundation
import StallWatchTestSupport
import Testing

@testable import StallWatch
@testable import StallWatchSidecar

#if canImport(Glibc)
    import Glibc
#endif

@Suite(.offPool) struct CorpusThreadsTests {
    @Test(.timeLimit(.minutes(3)))
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

    /// loop-a is stuck in a read of a pipe that loop-b writes only after three stalls of its own (0.4 s sleeps), each
    /// reported with an all-thread snapshot that stops loop-a too (its read restarted: one more read call, two more
    /// voluntary switches). Those stops, by another of the sidecar's watchers, are not loop-a's progress: its read
    /// is one report, `io`, as long as the read (the service's own clock) less at most one look (50 ms).
    @Test(.timeLimit(.minutes(3)))
    func aLoopStuckWhileAnotherStallsIsOneReportThroughTheOthersSnapshots() throws {
        let directory = SidecarFixtures.temporaryDirectory("threads-snapshots")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let target = try Spawned(
            "/usr/bin/python3", [CorpusHarness.fixture("asyncio_service.py"), "stuck-beside-stalls", "0.4"])
        try #require(target.waitFor("READY"), "target: \(target.stderr)")
        let loops = Dictionary(
            uniqueKeysWithValues: ThreadProbe.threadIDs(pid: target.pid, nameMatching: "loop-*").compactMap { tid in
                ProcDirectory(processID: target.pid, threadID: tid).comm().map { ($0, tid) }
            })
        let stuck = try #require(loops["loop-a"], "\(loops)")
        // Every stall of loop-b a report of its own, with its snapshot.
        let sidecar = try Spawned(
            SidecarFixtures.executable("stallwatch"),
            [
                "watch", "--pid", "\(target.pid)", "--threads", "loop-*", "--proc", "--threshold-ms", "100",
                "--report-dir", directory,
            ], environment: ["STALLWATCH_DEDUP_WINDOW_MS": "0"])
        #expect(target.wait(timeout: .seconds(60)) == 0, "target: \(target.stderr)")
        #expect(sidecar.wait(timeout: .seconds(10)) != nil, "the sidecar ends when its targets are gone")
        let reports = SidecarFixtures.reports(in: directory)
        let seen = reports.map { "\($0.loop.name) \($0.status) \($0.durationMs) ms \($0.cause?.kind.rawValue ?? "-")" }
        // The premise: three reports of loop-b, their snapshots holding loop-a's stack (at least one: a snapshot ends
        // with its stall, and a loaded machine may end one before it reaches loop-a).
        let snapshots = reports.filter { $0.loop.name == "loop-b" && $0.cause?.kind == .sleep }
        let stopped = snapshots.filter { $0.threads?.contains { $0.threadId == stuck && !$0.frames.isEmpty } == true }
        #expect(snapshots.count == 3 && !stopped.isEmpty, "\(seen)")
        let read = reports.filter { $0.loop.name == "loop-a" && $0.status != .withdrawn }
        try #require(read.count == 1, "\(seen); sidecar: \(sidecar.stderr)")
        #expect(read[0].cause?.kind == .io, "\(read[0].cause?.evidence ?? [])")
        let line = try #require(target.stdout.split(separator: "\n").first { $0.hasPrefix("READ ") })
        let times = line.split(separator: " ").dropFirst().compactMap { UInt64($0) }
        try #require(times.count == 2, "\(line)")
        let readMs = Double(times[1] - times[0]) / 1e6
        #expect(read[0].durationMs >= readMs - 50, "the read took \(readMs) ms; \(seen)")
    }

    @Test(.timeLimit(.minutes(3)))
    func threadsThatStartOrAreRenamedLaterArePickedUpAndThoseThatExitOrAreRenamedAwayDropped() throws {
        let directory = SidecarFixtures.temporaryDirectory("threads-changing")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let target = try Spawned(
            "/usr/bin/python3", [CorpusHarness.fixture("asyncio_service.py"), "changing-loops", "1.0"])
        try #require(target.waitFor("READY"), "target: \(target.stderr)")
        var tids = Self.threadIDs(in: target.stdout)
        let sidecar = try Spawned(
            SidecarFixtures.executable("stallwatch"),
            [
                "watch", "--pid", "\(target.pid)", "--threads", "loop-*", "--proc", "--threshold-ms", "250",
                "--rescan-ms", "100", "--report-dir", directory,
            ])
        let atStart = try #require(tids["loop-a"]).description
        let renamedAway = try #require(tids["loop-d"]).description
        #expect(Self.waitUntil { Set(Self.lines(sidecar, "watching").map(\.tid)) == [atStart, renamedAway] })
        kill(target.pid, SIGUSR1)  // loop-a exits, loop-b starts, spare becomes loop-c, loop-d becomes old-d
        try #require(target.waitFor("CHANGED"), "target: \(target.stderr)")
        tids.merge(Self.threadIDs(in: target.stdout)) { $1 }
        let late = try #require(tids["loop-b"]).description
        let renamedIn = try #require(tids["spare"]).description
        #expect(
            Self.waitUntil {
                Set(Self.lines(sidecar, "watching").map(\.tid)) == [atStart, renamedAway, late, renamedIn]
                    && Set(Self.lines(sidecar, "threadDropped").map(\.tid)) == [atStart, renamedAway]
            }, "sidecar: \(sidecar.stdout) \(sidecar.stderr)")
        let reasons = Dictionary(uniqueKeysWithValues: Self.lines(sidecar, "threadDropped").map { ($0.tid, $0.line) })
        #expect(reasons[atStart]?.contains("exited") == true)
        #expect(reasons[renamedAway]?.contains("old-d") == true)
        kill(target.pid, SIGUSR1)  // loop-b and loop-c stall
        #expect(target.wait(timeout: .seconds(30)) == 0, "target: \(target.stderr)")
        #expect(sidecar.wait(timeout: .seconds(10)) != nil, "the sidecar ends when its target is gone")
        let reports = SidecarFixtures.reports(in: directory)
        #expect(
            Set(reports.map { "\($0.loop.name)=\($0.loop.threadId)" }) == ["loop-b=\(late)", "loop-c=\(renamedIn)"],
            "\(reports.map { ($0.loop.name, $0.cause?.kind) })")
        #expect(reports.allSatisfy { $0.cause?.kind == .sleep && $0.detection.source == "proc" })
    }

    /// A thread a loop starts and leaves unnamed has the loop's name (a Linux thread starts with its creator's):
    /// it is watched, and its sleep, no loop's, gives no report; the loop's own stall still does.
    @Test(.timeLimit(.minutes(3)))
    func aThreadALoopStartedAndLeftUnnamedIsNotTakenForALoop() throws {
        let directory = SidecarFixtures.temporaryDirectory("threads-inherited")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let target = try Spawned(
            "/usr/bin/python3", [CorpusHarness.fixture("asyncio_service.py"), "loop-starts-worker", "1.0"])
        try #require(target.waitFor("READY"), "target: \(target.stderr)")
        let sidecar = try Spawned(
            SidecarFixtures.executable("stallwatch"),
            [
                "watch", "--pid", "\(target.pid)", "--threads", "loop-*", "--proc", "--threshold-ms", "250",
                "--rescan-ms", "50", "--report-dir", directory,
            ])
        try #require(target.waitFor("WORKER"), "target: \(target.stderr)")
        let tids = Self.threadIDs(in: target.stdout)
        let loop = try #require(tids["loop-a"]).description
        let worker = try #require(tids["worker"]).description
        #expect(
            Self.waitUntil { Set(Self.lines(sidecar, "watching").map(\.tid)) == [loop, worker] },
            "the worker matches the loop's rule and is watched: \(sidecar.stdout) \(sidecar.stderr)")
        #expect(target.wait(timeout: .seconds(30)) == 0, "target: \(target.stderr)")
        #expect(sidecar.wait(timeout: .seconds(10)) != nil, "the sidecar ends when its target is gone")
        let reports = SidecarFixtures.reports(in: directory)
        #expect(
            reports.map { "\($0.loop.name)=\($0.loop.threadId)" } == ["loop-a=\(loop)"],
            "\(reports.map { ($0.loop.name, $0.loop.threadId, $0.cause?.kind) })")
        #expect(reports.allSatisfy { $0.cause?.kind == .sleep })
    }

    @Test(.timeLimit(.minutes(3)))
    func theDaemonGivesEachThreadItsRulesNameADetectorOfItsOwn() throws {
        let directory = SidecarFixtures.temporaryDirectory("daemon-threads")
        let shm = SidecarFixtures.temporaryDirectory("daemon-threads-shm")
        defer {
            try? FileManager.default.removeItem(atPath: directory)
            try? FileManager.default.removeItem(atPath: shm)
        }
        // The process publishes a heartbeat segment (its main thread idle) that it keeps mapped, as an embedded
        // StallWatch would; the daemon finds it by that segment.
        let segment = "\(shm)/pending"
        let target = try Spawned(
            "/usr/bin/python3", [CorpusHarness.fixture("asyncio_service.py"), "two-loops", "1.0"],
            environment: ["HEARTBEAT_SEGMENT": segment])
        try #require(target.waitFor("PID"), "target: \(target.stderr)")
        HeartbeatReaderTests.write(HeartbeatReaderTests.validBytes(pid: target.pid), to: segment)
        kill(target.pid, SIGUSR1)
        try #require(target.waitFor("READY"), "target: \(target.stderr)")
        try FileManager.default.moveItem(atPath: segment, toPath: "\(shm)/stallwatch.\(target.pid)")
        var configuration = StallWatchConfiguration()
        configuration.reportDirectory = directory
        let events = Locked<[String]>([])
        // Per target: the rule for python3 names loop-b; the one for another program must not apply to it.
        let rules = [
            LoopThreadRule(program: "python3*", threads: "loop-b"), LoopThreadRule(program: "node", threads: "loop-*"),
        ]
        let daemon = SidecarDaemon(
            directory: shm, configuration: configuration, scanInterval: .milliseconds(50), threadRules: rules
        ) { event in
            if let line = event.lineFields.map(JSONLinesEventWriter.encode) { events.withLock { $0.append(line) } }
        }
        let done = DispatchSemaphore(value: 0)
        Thread {
            try? daemon.run()
            done.signal()
        }.start()
        defer {
            daemon.stop()
            _ = done.wait(timeout: .now() + 10)
        }
        let loopB = try #require(ThreadProbe.threadIDs(pid: target.pid, nameMatching: "loop-b").first)
        #expect(
            Self.waitUntil { daemon.watchedThreads(of: target.pid) == [target.pid, loopB] },
            "\(daemon.watchedThreads(of: target.pid)) \(events.withLock { $0 })")
        #expect(daemon.watchedLoop(of: target.pid, threadID: loopB)?.loopName == "loop-b")
        #expect(target.wait(timeout: .seconds(30)) == 0, "target: \(target.stderr)")
        #expect(Self.waitUntil { !daemon.watchedPIDs.contains(target.pid) })
        let reports = SidecarFixtures.reports(in: directory)
        try #require(reports.count == 1, "\(reports.map { ($0.loop.name, $0.cause?.kind) })")
        #expect(reports[0].loop.name == "loop-b" && reports[0].loop.threadId == loopB)
        #expect(reports[0].detection.source == "proc" && reports[0].cause?.kind == .sleep)
    }

    /// `name=tid` pairs the fixture prints.
    static func threadIDs(in output: String) -> [String: Int32] {
        var out: [String: Int32] = [:]
        for word in output.split(whereSeparator: { $0 == " " || $0 == "\n" }) {
            let parts = word.split(separator: "=")
            if parts.count == 2, let tid = Int32(parts[1]) { out[String(parts[0])] = tid }
        }
        return out
    }

    /// The sidecar's JSON lines of one event, with their `threadId`.
    static func lines(_ sidecar: Spawned, _ event: String) -> [(tid: String, line: String)] {
        sidecar.stdout.split(separator: "\n").filter { $0.contains("\"event\":\"\(event)\"") }.compactMap { line in
            guard let range = line.range(of: "\"threadId\":") else { return nil }
            return (String(line[range.upperBound...].prefix { $0.isNumber }), String(line))
        }
    }

    /// Waits for `condition`, looking every 10 ms, up to 20 s.
    static func waitUntil(_ condition: () -> Bool) -> Bool {
        let deadline = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now < deadline {
            if condition() { return true }
            usleep(10_000)
        }
        return condition()
    }

    @Test func aThreadRuleNamesThreadsAndOptionallyThePrograms() throws {
        let everywhere = try LoopThreadRule(parsing: "NIO-ELT-*")
        #expect(everywhere.program == nil && everywhere.applies(toExecutable: "/usr/bin/anything"))
        #expect(everywhere.matches(threadName: "NIO-ELT-0-#3") && !everywhere.matches(threadName: "main"))
        let python = try LoopThreadRule(parsing: "python3*=loop-[ab]")
        #expect(python.applies(toExecutable: "/usr/bin/python3.11") && !python.applies(toExecutable: "/usr/bin/node"))
        #expect(python.matches(threadName: "loop-b") && !python.matches(threadName: "loop-c"))
        #expect(python.description == "python3*=loop-[ab]")
        #expect(throws: SidecarError.self) { try LoopThreadRule(parsing: "=loop-*") }
        #expect(throws: SidecarError.self) { try LoopThreadRule(parsing: "node=") }
    }

    @Test func aGlobMatchesThreadNamesOfAProcess() {
        let mine = ThreadProbe.threadIDs(pid: getpid(), nameMatching: "*")
        #expect(mine.contains(getpid()))
        #expect(ThreadProbe.threadIDs(pid: getpid(), nameMatching: "no-such-thread-[0-9]").isEmpty)
    }
}
