// `stallwatch dump`: the stacks of a live process now, its lock owners, and a target that runs on untouched.
import CStallWatchCore
import Foundation
import StallWatchTestSupport
import Testing

@testable import StallWatch
@testable import StallWatchSidecar

#if canImport(Glibc)
    import Glibc
#endif

@Suite(.offPool, .serialized) struct ProcessDumpTests {
    static let stallwatch = SidecarFixtures.executable("stallwatch")

    /// `Fixtures/lock_owner.c` built with symbols, once per test process.
    static let lockOwner = SidecarFixtures.builtC("lock_owner.c")

    static let packageRoot = SidecarFixtures.fixturesDirectory.deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// Checks `json` against Config/stallwatch-dump.schema.json with the PyPI `jsonschema` package (test tooling
    /// `scripts/bootstrap.sh` installs): its absence is a failure that names it.
    static func expectValidDump(_ json: String) throws {
        let directory = SidecarFixtures.temporaryDirectory("dump-schema")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try json.write(toFile: directory + "/dump.json", atomically: true, encoding: .utf8)
        let probe = try Spawned("/usr/bin/env", ["python3", "-c", "import jsonschema"])
        try #require(
            probe.wait() == 0,
            "python3 cannot import jsonschema (the PyPI package scripts/bootstrap.sh installs): \(probe.stderr)")
        let check = try Spawned(
            "/usr/bin/env",
            [
                "python3", packageRoot.appendingPathComponent("scripts/validate-reports.py").path, "--schema",
                packageRoot.appendingPathComponent("Config/stallwatch-dump.schema.json").path, directory + "/dump.json",
            ])
        #expect(check.wait() == 0, "schema validation failed: \(check.stdout)\(check.stderr)")
    }

    /// `stallwatch dump -p pid --json`, checked against the schema, and the thread `tid` of it.
    static func dumpThread(pid: Int32, tid: Int32) throws -> (
        dump: ProcessDump, thread: ProcessDump.Thread, json: String
    ) {
        let dump = try Spawned(stallwatch, ["dump", "-p", "\(pid)", "--json"])
        #expect(dump.wait() == 0, "dump: \(dump.stderr)")
        try expectValidDump(dump.stdout)
        let parsed = try ProcessDump.decode(Data(dump.stdout.utf8))
        let thread = try #require(parsed.threads.first { $0.snapshot.threadId == tid }, "\(dump.stdout)")
        return (parsed, thread, dump.stdout)
    }

    /// Waits until `condition` holds (checked every 10 ms), at most `timeout`.
    static func eventually(_ timeout: Duration = .seconds(20), _ condition: () -> Bool) -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if condition() { return true }
            usleep(10_000)
        }
        return condition()
    }

    /// The lock_owner fixture with its main thread already blocked in the mutex the holder keeps.
    static func blockedTarget() throws -> (target: Spawned, holder: Int32) {
        let binary = try #require(lockOwner, "cc could not build the fixture")
        let target = try Spawned(binary, [])
        try #require(target.waitFor("READY"), "target: \(target.stderr)")
        let pid = target.pid
        #expect(eventually { ThreadProbe.read(pid: pid, tid: pid)?.syscallName == "futex" }, "main blocks")
        let holder = try #require(ThreadProbe.threadIDs(pid: pid, nameMatching: "lock-holder").first)
        return (target, holder)
    }

    static func aliveCount(_ target: Spawned) -> Int {
        target.stdout.split(separator: "\n").filter { $0.hasPrefix("ALIVE") }.count
    }

    /// The target is running, traced by nobody, and keeps making progress; nothing it called failed with EINTR.
    static func expectUntouched(_ target: Spawned) {
        let state = SidecarFixtures.traceState(pid: target.pid)
        #expect(state?.state != "T" && state?.state != "t", "not left stopped: \(String(describing: state))")
        #expect(state?.tracer == "0", "not left traced")
        let before = aliveCount(target)
        #expect(eventually { aliveCount(target) >= before + 3 }, "the target keeps running")
        #expect(
            !target.stdout.contains("EINTR"), "\(target.stdout.split(separator: "\n").filter { $0.contains("EINTR") })")
    }

    @Test(.timeLimit(.minutes(3)))
    func dumpNamesTheOwnerOfTheLockTheMainThreadWaitsForAndLeavesTheTargetRunning() throws {
        let (target, holder) = try Self.blockedTarget()
        let pid = target.pid
        let dump = try Spawned(Self.stallwatch, ["dump", "-p", "\(pid)"])
        #expect(dump.wait() == 0, "dump: \(dump.stderr)")
        // Not a terminal: JSON, parsed both as plain JSON and as the library's type.
        let object = try #require(try JSONSerialization.jsonObject(with: Data(dump.stdout.utf8)) as? [String: Any])
        #expect(object["kind"] as? String == "stallwatch-dump")
        let threads = try #require(object["threads"] as? [[String: Any]])
        let firstFrame = try #require((threads.first?["frames"] as? [[String: Any]])?.first)
        #expect((firstFrame["address"] as? String)?.hasPrefix("0x") == true, "frames as in reports show --json")
        try Self.expectValidDump(dump.stdout)
        let parsed = try ProcessDump.decode(Data(dump.stdout.utf8))
        #expect(parsed.process.pid == pid)
        #expect(parsed.loopThreadIds == [pid])
        #expect(parsed.threadCount == 3)
        #expect(parsed.threads.count == 3, "every thread is listed")
        #expect(
            parsed.threads.prefix(2).map(\.snapshot.threadId) == [pid, holder],
            "the stuck main thread, then the lock's owner")
        let main = try #require(parsed.threads.first)
        #expect(main.role == .loop)
        #expect(main.snapshot.syscall == "futex" && main.snapshot.waitAddress != nil)
        #expect(main.snapshot.waitingForThreadId == holder, "the owner is named")
        #expect(main.snapshot.frames.contains { $0.symbol == "wait_for_lock" }, "\(main.snapshot.frames)")
        let owner = try #require(parsed.threads.dropFirst().first)
        #expect(owner.role == .lockOwner && owner.snapshot.name == "lock-holder")
        #expect(owner.snapshot.frames.contains { $0.symbol == "hold_lock_forever" }, "\(owner.snapshot.frames)")
        // Each says what its capture cost it: the stop, or 0 for a stack read as the thread slept (a capture that
        // could not stop it in time on a loaded machine falls back to that read).
        #expect(parsed.threads.prefix(2).allSatisfy { $0.pauseMicros.map { $0 >= 0 } ?? false })
        Self.expectUntouched(target)

        let all = try Spawned(Self.stallwatch, ["dump", "--pid", "\(pid)", "--all-threads", "--json"])
        #expect(all.wait() == 0, "dump: \(all.stderr)")
        try Self.expectValidDump(all.stdout)
        let every = try ProcessDump.decode(Data(all.stdout.utf8))
        #expect(every.threads.count == 3)
        let ticker = try #require(every.threads.first { $0.snapshot.name == "ticker" })
        #expect(ticker.role == .other && ticker.snapshot.frames.contains { $0.symbol == "ticker" })
        Self.expectUntouched(target)

        // eu-stack on the same target: the two blocked threads do not move, so the frames must be the same
        // addresses with the same names.
        let dumped = try ProcessDumper(processID: pid).dump()
        let euStack = try Spawned("/usr/bin/eu-stack", ["-p", "\(pid)"])
        #expect(euStack.wait() == 0, "eu-stack: \(euStack.stderr)")
        let theirs = Self.euStackThreads(euStack.stdout)
        for tid in [pid, holder] {
            let ours = try #require(dumped.threads.first { $0.snapshot.threadId == tid }).snapshot.frames
            let expected = try #require(theirs[tid], "eu-stack lists thread \(tid): \(euStack.stdout)")
            #expect(ours.map(\.address) == expected.map(\.address), "thread \(tid)\n\(euStack.stdout)")
            #expect(ours.map { $0.symbol ?? "" } == expected.map(\.symbol), "thread \(tid)")
        }
    }

    @Test(.timeLimit(.minutes(3)))
    func aSpinningThreadIsShownOnCPUForAtMostTheDumpsOwnSpanAndAWaitInBetweenDropsIt() throws {
        // The shell waits once for a child (a voluntary switch for the rule's checks below), then spins.
        let spinner = try Spawned("/bin/sh", ["-c", "/bin/true; while :; do :; done"])
        let pid = spinner.pid
        #expect(Self.eventually { ThreadProbe.read(pid: pid, tid: pid)?.state == "R" }, "the shell spins")
        let started = ContinuousClock.now
        let dump = try Spawned(Self.stallwatch, ["dump", "-p", "\(pid)", "--json"])
        #expect(dump.wait() == 0, "dump: \(dump.stderr)")
        let span = ContinuousClock.now - started
        try Self.expectValidDump(dump.stdout)
        let parsed = try ProcessDump.decode(Data(dump.stdout.utf8))
        let main = try #require(parsed.threads.first { $0.snapshot.threadId == pid })
        #expect(main.activity == .onCPU)
        let onCPU = try #require(main.onCPUForAtLeastMs, "\(dump.stdout)")
        #expect(
            onCPU > 0 && onCPU <= Double(span.components.seconds) * 1000 + Double(span.components.attoseconds) / 1e15)
        // The rule itself: a voluntary switch since the first look, beyond those counted across the dump's own
        // stops, drops the figure.
        let switches = try #require(ProcDirectory(processID: pid, threadID: pid).status()?.voluntarySwitches)
        try #require(switches >= 1, "the shell waited for its child")
        let earlier = sw_monotonic_ns() - 1_000_000
        let unchanged = ProcessDumper.onCPUFor(pid: pid, firstLook: [pid: (switches, earlier)], stopSwitches: [:])
        #expect((unchanged[pid] ?? 0) >= 1_000_000)
        let waited = ProcessDumper.onCPUFor(pid: pid, firstLook: [pid: (switches - 1, earlier)], stopSwitches: [:])
        #expect(waited[pid] == nil)
        let stopped = ProcessDumper.onCPUFor(
            pid: pid, firstLook: [pid: (switches - 1, earlier)], stopSwitches: [pid: 1])
        #expect(stopped[pid] != nil, "the switches of the dump's own stop are allowed for")
    }

    @Test(.timeLimit(.minutes(3)))
    func aThreadWaitingForAFileLockNamesTheProcessThatHoldsIt() throws {
        let file = SidecarFixtures.temporaryDirectory("dump-flock") + "/lock"
        // The shell takes the lock on descriptor 9, then becomes `sleep` (same process, same descriptor).
        let holder = try Spawned("/bin/sh", ["-c", "exec 9>'\(file)'; flock 9; echo HELD; exec sleep 600"])
        try #require(holder.waitFor("HELD"), "holder: \(holder.stderr)")
        let waiter = try Spawned("/usr/bin/flock", [file, "true"])
        let pid = waiter.pid
        #expect(Self.eventually { ThreadProbe.read(pid: pid, tid: pid)?.syscallName == "flock" }, "the waiter blocks")
        let (_, main, json) = try Self.dumpThread(pid: pid, tid: pid)
        #expect(main.activity == .blocked)
        let process = try #require(main.blockingProcess, "\(json)")
        #expect(process.processId == holder.pid)
        #expect(process.name == "sleep")
        // /proc/locks names the `flock` command that took the lock and exited: the holder is found by the open file
        // description it shares with the shell, now `sleep`.
        #expect(process.reason.contains("fdinfo"), "\(process.reason)")
        // The holder's stack, read from outside: asleep in its sleep, and left running untraced.
        let symbols = (process.frames ?? []).compactMap(\.symbol)
        #expect(process.threadId == holder.pid && symbols.contains { $0.contains("nanosleep") }, "\(symbols)")
        #expect(SidecarFixtures.traceState(pid: pid)?.tracer == "0", "not left traced")
        let holderState = SidecarFixtures.traceState(pid: holder.pid)
        #expect(holderState?.tracer == "0" && holderState?.state == "S", "\(String(describing: holderState))")
    }

    /// A CPython service whose loop waits on a `logging` handler's lock (a `threading.RLock`, whose semaphore records
    /// no owner) while another thread holds it: the RLock's own structure names that thread, first among the
    /// candidates, likely, with where its handle was read.
    @Test(.timeLimit(.minutes(3)))
    func aLockWhoseStructureRecordsItsHolderNamesThatThreadFirst() throws {
        let service = try Spawned(
            "/usr/bin/python3", [CorpusHarness.fixture("asyncio_service.py"), "logging-lock", "30"])
        try #require(service.waitFor("READY"), "service: \(service.stderr)")
        let pid = service.pid
        #expect(Self.eventually { !ThreadProbe.threadIDs(pid: pid, nameMatching: "audit").isEmpty })
        let audit = try #require(ThreadProbe.threadIDs(pid: pid, nameMatching: "audit").first)
        // The loop blocks on the handler's lock once the audit thread's record is on its way: the audit thread waits
        // for the collector's answer (holding the lock, not the interpreter's), and the loop sleeps in a futex — not
        // the one of the event that let it go on, which it may still be in, woken, waiting for a CPU.
        #expect(
            Self.eventually {
                guard let shipping = ThreadProbe.read(pid: pid, tid: audit),
                    let loop = ThreadProbe.read(pid: pid, tid: pid)
                else { return false }
                return shipping.state == "S" && shipping.syscallKind == .io && loop.state == "S"
                    && loop.syscallName == "futex"
            }, "the loop blocks")
        let (parsed, main, json) = try Self.dumpThread(pid: pid, tid: pid)
        #expect(main.activity == .blocked)
        #expect(main.recordedHolderId == audit, "\(json)")
        #expect(main.candidateHolderIds?.first == audit)
        #expect(main.recordedHolderEvidence?.contains("this thread's handle (pthread_self)") == true)
        let holder = try #require(parsed.threads.first { $0.snapshot.threadId == audit })
        #expect(holder.role == .candidateHolder)
        #expect(SidecarFixtures.traceState(pid: pid)?.tracer == "0", "not left traced")
    }

    /// Arriving mid-incident at a service whose named loop is stuck on a lock another thread holds: the loop
    /// named by `--threads` or `--tid` comes first, the holder is tagged, and each blocked thread says how long it
    /// has not run — at least as long as the test has seen it blocked, at most as long as the process has lived.
    @Test(.timeLimit(.minutes(3)))
    func namedLoopsComeFirstWithTheirHolderTaggedAndHowLongEachHasBeenBlocked() throws {
        let spawned = ContinuousClock.now
        let (target, holder) = try Self.blockedTarget()
        let pid = target.pid
        let seenBlocked = ContinuousClock.now
        let lossAtStart = SidecarFixtures.taskClockLossMs()
        // The scenario: the engineer arrives a while after the loop got stuck.
        Thread.sleep(forTimeInterval: 1)
        let asked = ContinuousClock.now
        let byName = try Spawned(Self.stallwatch, ["dump", "-p", "\(pid)", "--threads", "lock_own*", "--json"])
        #expect(byName.wait() == 0, "dump: \(byName.stderr)")
        let lived = ContinuousClock.now - spawned
        try Self.expectValidDump(byName.stdout)
        let dump = try ProcessDump.decode(Data(byName.stdout.utf8))
        #expect(dump.loopThreadIds == [pid], "the glob names the main thread (comm lock_owner)")
        #expect(dump.threads.prefix(2).map(\.snapshot.threadId) == [pid, holder])
        #expect(dump.threads.first?.role == .loop && dump.threads.first?.activity == .blocked)
        #expect(dump.threads.dropFirst().first?.role == .lockOwner)
        let blocked = try #require(dump.threads.first?.blockedForAtLeastMs, "the loop's blocked time is shown")
        let seenMs =
            Double((asked - seenBlocked).components.seconds) * 1000
            + Double((asked - seenBlocked).components.attoseconds) / 1e15
        let livedMs = Double(lived.components.seconds) * 1000 + Double(lived.components.attoseconds) / 1e15
        // The figure is on the thread's CPU's task clock, which leaves out the time that CPU spent in interrupts
        // or was stolen by the hypervisor (a loaded VM: a tenth of a second in a second): at least the time seen
        // less that, on /proc/stat's count (10 ms ticks, one more for the rounding).
        let cpu = Int(ProcDirectory(processID: pid, threadID: pid).stat()?.processor ?? 0)
        let lostMs = max(0, (SidecarFixtures.taskClockLossMs()[cpu] ?? 0) - (lossAtStart[cpu] ?? 0)) + 10
        #expect(
            blocked >= seenMs - lostMs && blocked <= livedMs,
            "blocked ≥ \(blocked) ms; seen \(seenMs), lived \(livedMs), CPU \(cpu) lost \(lostMs) ms")
        Self.expectUntouched(target)

        let byID = try Spawned(Self.stallwatch, ["dump", "-p", "\(pid)", "--tid", "\(holder)", "--json"])
        #expect(byID.wait() == 0, "dump: \(byID.stderr)")
        let second = try ProcessDump.decode(Data(byID.stdout.utf8))
        #expect(second.loopThreadIds == [holder])
        #expect(second.threads.first?.snapshot.threadId == holder && second.threads.first?.role == .loop)
        #expect(second.threads.dropFirst().first?.snapshot.threadId == pid, "then the stuck thread")
        Self.expectUntouched(target)
    }

    /// `eu-stack -p` output: `TID n:` then `#i  0xADDR symbol` lines, by thread.
    static func euStackThreads(_ text: String) -> [Int32: [(address: UInt64, symbol: String)]] {
        var result: [Int32: [(address: UInt64, symbol: String)]] = [:]
        var current: Int32?
        for line in text.split(separator: "\n") {
            if line.hasPrefix("TID "), let tid = Int32(line.dropFirst(4).dropLast()) {
                current = tid
                result[tid] = []
            } else if line.hasPrefix("#"), let tid = current {
                let parts = line.split(separator: " ", omittingEmptySubsequences: true)
                guard parts.count >= 2, let address = UInt64(hexAddress: String(parts[1])) else { continue }
                result[tid]?.append((address, parts.count > 2 ? String(parts[2]) : ""))
            }
        }
        return result
    }

    @Test(.timeLimit(.minutes(3)))
    func dumpOfTheDemoServiceShowsItsLoopIdleInTheEventLoop() throws {
        let directory = SidecarFixtures.temporaryDirectory("dump-demo")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let serve = try Spawned(
            SidecarFixtures.executable("stallwatch-demo"),
            ["serve", "--port", "0", "--sessions", "100", "--report-dir", directory],
            environment: ["STALLWATCH_HEARTBEAT_DIRECTORY": directory])
        #expect(serve.waitFor("\"listening\""), "serve: \(serve.stderr)")
        let pid = serve.pid
        #expect(Self.eventually { ThreadProbe.read(pid: pid, tid: pid)?.syscallName == "ppoll" }, "the loop idles")
        let dump = try Spawned(Self.stallwatch, ["dump", "-p", "\(pid)", "--heartbeat-dir", directory])
        #expect(dump.wait() == 0, "dump: \(dump.stderr)")
        try Self.expectValidDump(dump.stdout)
        let parsed = try ProcessDump.decode(Data(dump.stdout.utf8))
        #expect(parsed.loopThreadIds == [pid], "the heartbeat names the loop thread")
        let loop = try #require(parsed.threads.first)
        #expect(loop.role == .loop)
        let names = loop.snapshot.frames.compactMap(\.readableName)
        #expect(names.contains { $0.hasPrefix("EventLoop.idleWait") }, "\(names)")
        #expect(loop.snapshot.frames.contains { $0.shortSymbol != nil && $0.symbol != $0.shortSymbol })
        let state = SidecarFixtures.traceState(pid: pid)
        #expect(state?.state != "T" && state?.state != "t" && state?.tracer == "0")
        #expect(serve.process.isRunning)
    }

    @Test func aMissingProcessIsNamedWithItsExitCode() throws {
        let gone = try Spawned(Self.stallwatch, ["dump", "--pid", "4194300"])
        #expect(gone.wait() == 4)
        #expect(gone.stderr.contains("no such process: process 4194300"), "\(gone.stderr)")
        let usage = try Spawned(Self.stallwatch, ["dump"])
        #expect(usage.wait() == 2)
        #expect(usage.stderr.contains("--pid PID is required"))
    }

    @Test(.timeLimit(.minutes(3)))
    func aZombieAndThisProcessAreNotTraceable() throws {
        // `sleep 0` exits as a child of the shell that becomes `sleep 30`, which never reaps it.
        let parent = try Spawned("/bin/sh", ["-c", "sleep 0 & exec sleep 30"])
        var zombie: Int32?
        #expect(
            Self.eventually {
                let children = ProcFile.text("/proc/\(parent.pid)/task/\(parent.pid)/children") ?? ""
                zombie = children.split(separator: " ").compactMap { Int32($0) }.first {
                    ThreadProbe.read(pid: $0, tid: $0)?.state == "Z"
                }
                return zombie != nil
            })
        let pid = try #require(zombie)
        let dump = try Spawned(Self.stallwatch, ["dump", "-p", "\(pid)"])
        #expect(dump.wait() == 6)
        #expect(dump.stderr.contains("zombie"), "\(dump.stderr)")
        do {
            _ = try ProcessDumper(processID: getpid()).dump()
            Issue.record("a process cannot dump itself")
        } catch {
            #expect(error.code == .notTraceable)
        }
    }

    @Test(.timeLimit(.minutes(3)))
    func aProcessAnotherTracerHoldsIsNotTraceable() throws {
        try #require(FileManager.default.isExecutableFile(atPath: "/usr/bin/strace"), "strace plays the other tracer")
        let (target, _) = try Self.blockedTarget()
        // strace seizes the target and stays until it is killed (the kernel then detaches it).
        let strace = try Spawned("/usr/bin/strace", ["-q", "-o", "/dev/null", "-p", "\(target.pid)"])
        #expect(Self.eventually { SidecarFixtures.traceState(pid: target.pid)?.tracer == "\(strace.pid)" }, "attached")
        let dump = try Spawned(Self.stallwatch, ["dump", "-p", "\(target.pid)"])
        #expect(dump.wait() == 6)
        #expect(dump.stderr.contains("is tracing it"), "\(dump.stderr)")
        withExtendedLifetime(strace) {}
    }

    /// Needs root (to run the dump as `nobody`); the CLI runs from a copy `nobody` can reach
    /// (``OtherUserExecutable``), wherever the checkout is.
    @Test(.timeLimit(.minutes(3)))
    func anotherUsersProcessIsAPermissionError() throws {
        let stallwatch = try OtherUserExecutable("stallwatch")
        let (target, _) = try Self.blockedTarget()
        let dump = try Spawned(
            "/usr/sbin/runuser", ["-u", stallwatch.user, "--", stallwatch.path, "dump", "-p", "\(target.pid)"])
        #expect(dump.wait() == 5, "\(dump.stderr)")
        #expect(dump.stderr.contains("permission denied"), "\(dump.stderr)")
        Self.expectUntouched(target)
    }
}
