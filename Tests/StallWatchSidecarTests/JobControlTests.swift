// `stallwatch run` and `watch` under job control: ^C at a terminal, forwarded signals, ^Z during captures.
import Foundation
import StallWatch
import StallWatchTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite(.offPool, .serialized) struct JobControlTests {
    static let stallwatch = SidecarFixtures.executable("stallwatch")

    /// A child that counts the signals it gets (SIGINT, SIGUSR1, SIGUSR2, SIGHUP, SIGWINCH, and SIGTERM when
    /// `countsTerm`), one line per signal in `log`, and says `ready` once its handlers are in place.
    static func countingChild(log: String, countsTerm: Bool = false) -> [String] {
        let script = """
            import signal, sys, time, os
            # One raw append per signal: a buffered file's write is not reentrant, and a signal that arrives
            # while the handler of the one before is still inside it would raise.
            log = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
            def seen(number, frame):
                os.write(log, b"%d\\n" % number)
            counted = [signal.SIGINT, signal.SIGUSR1, signal.SIGUSR2, signal.SIGHUP, signal.SIGWINCH]
            if sys.argv[2] == "term":
                counted.append(signal.SIGTERM)
            for number in counted:
                signal.signal(number, seen)
            os.write(log, b"ready\\n")
            while True:
                time.sleep(0.05)
            """
        return ["/usr/bin/python3", "-c", script, log, countsTerm ? "term" : "-"]
    }

    /// `stallwatch run --proc -- ARGS` in a process group of its own (as a shell starts a job), so the test can
    /// signal the whole group without signalling itself.
    static func runInItsOwnGroup(_ arguments: [String]) throws -> Spawned {
        try Spawned(
            "/usr/bin/python3",
            [
                "-c", "import os, sys; os.setpgid(0, 0); os.execv(sys.argv[1], sys.argv[1:])", Self.stallwatch, "run",
                "--proc", "--",
            ] + arguments)
    }

    /// The processes of process group `group`: `run`, its signal witness, its child.
    static func processes(inGroup group: Int32) -> [Int32] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap(Int32.init).filter { getpgid($0) == group }.sorted()
    }

    /// Sends SIGUSR1 to `run` alone and waits until the child has logged it: every signal `run` forwarded before
    /// is in the log by then (the relay passes signals on in order, and the child logs them in order of arrival).
    static func barrier(run: Spawned, log: String) -> Bool {
        let before = lines(log).count
        kill(run.pid, SIGUSR1)
        return waitFor { lines(log).count > before && lines(log).last == "\(SIGUSR1)" }
    }

    /// `kill -- -PGID` five times (what `timeout`, a supervisor or a shell's job control does): the child, in the
    /// group, receives each from the kernel; `run` receives each too and must not forward it.
    @Test(.timeLimit(.minutes(3)))
    func fiveSIGINTsSentToTheProcessGroupReachTheChildExactlyFiveTimes() throws {
        let directory = SidecarFixtures.temporaryDirectory("group-int")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let log = directory + "/signals"
        let run = try Self.runInItsOwnGroup(Self.countingChild(log: log))
        defer { kill(-run.pid, SIGKILL) }
        #expect(Self.waitFor { Self.lines(log).contains("ready") }, "\(run.stderr)")
        for sent in 1...5 {
            kill(-run.pid, SIGINT)
            #expect(Self.waitFor { Self.lines(log).count > sent }, "SIGINT \(sent) reached the child")
        }
        #expect(Self.barrier(run: run, log: log))
        #expect(
            Self.lines(log) == ["ready"] + Array(repeating: "\(SIGINT)", count: 5) + ["\(SIGUSR1)"], "\(run.stderr)")
        #expect(run.process.isRunning, "run survived them: \(run.stderr)")
    }

    /// `kill PID` of `run` alone: forwarded, once.
    @Test(.timeLimit(.minutes(3)))
    func aSIGTERMSentToRunAloneReachesTheChildOnce() throws {
        let directory = SidecarFixtures.temporaryDirectory("alone-term")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let log = directory + "/signals"
        let run = try Self.runInItsOwnGroup(Self.countingChild(log: log, countsTerm: true))
        defer { kill(-run.pid, SIGKILL) }
        #expect(Self.waitFor { Self.lines(log).contains("ready") }, "\(run.stderr)")
        kill(run.pid, SIGTERM)
        #expect(Self.waitFor { Self.lines(log).count == 2 }, "the SIGTERM was forwarded")
        #expect(Self.barrier(run: run, log: log))
        #expect(Self.lines(log) == ["ready", "\(SIGTERM)", "\(SIGUSR1)"])
    }

    /// A signal sent to every process one by one, as systemd's `KillMode=control-group` does to every process of
    /// a service's cgroup: the child receives its own; `run` must not forward the one it receives.
    @Test(.timeLimit(.minutes(3)))
    func aSIGTERMSentToEveryProcessOneByOneReachesTheChildOnce() throws {
        let directory = SidecarFixtures.temporaryDirectory("each-term")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let log = directory + "/signals"
        let run = try Self.runInItsOwnGroup(Self.countingChild(log: log, countsTerm: true))
        defer { kill(-run.pid, SIGKILL) }
        #expect(Self.waitFor { Self.lines(log).contains("ready") }, "\(run.stderr)")
        let group = Self.processes(inGroup: run.pid)
        #expect(group.count == 3, "run, its signal witness and its child: \(group)")
        // `run` last: its signal then finds the witness's already there (systemd's own order, `run` first, leaves
        // the witness's to arrive within the forwarder's grace; SignalForwarderTests time that case).
        for pid in group where pid != run.pid { kill(pid, SIGTERM) }
        kill(run.pid, SIGTERM)
        #expect(Self.waitFor { Self.lines(log).count == 2 }, "the child's own SIGTERM")
        #expect(Self.barrier(run: run, log: log))
        #expect(Self.lines(log) == ["ready", "\(SIGTERM)", "\(SIGUSR1)"])
    }

    /// The witness shares `run`'s process group and cgroup, holds none of `run`'s descriptors (its pipes to the
    /// terminal or a log reader would stay open), and is gone once `run` has exited.
    @Test(.timeLimit(.minutes(3)))
    func theSignalWitnessSharesTheGroupHoldsNoDescriptorOfRunsAndEndsWithIt() throws {
        let run = try Self.runInItsOwnGroup(["/bin/sleep", "30"])
        defer { kill(-run.pid, SIGKILL) }
        var witness: Int32?
        #expect(
            Self.waitFor {
                witness = Self.processes(inGroup: run.pid).first {
                    ProcDirectory(processID: $0).comm()?.hasPrefix("stallwatch-sigw") == true
                }
                return witness != nil
            })
        let pid = try #require(witness)
        #expect(ProcDirectory(processID: pid).text("cgroup") == ProcDirectory(processID: run.pid).text("cgroup"))
        let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? []
        let targets = descriptors.compactMap {
            try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\($0)")
        }
        // Its signalfd and its two pipe ends to `run`, nothing else.
        #expect(descriptors.count == 3, "\(targets)")
        #expect(targets.filter { $0.hasPrefix("pipe:") }.count == 2 && targets.contains { $0.contains("signalfd") })
        kill(run.pid, SIGTERM)
        #expect(run.wait(timeout: .seconds(10)) == 128 + SIGTERM, "\(run.stderr)")
        #expect(Self.waitFor { kill(pid, 0) != 0 }, "the witness ended with run")
    }

    static func lines(_ path: String) -> [String] {
        ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    static func waitFor(_ condition: () -> Bool, timeout: Duration = .seconds(20)) -> Bool {
        pollUntil(timeout: timeout, every: .milliseconds(5), condition)
    }

    @Test(.timeLimit(.minutes(3)))
    func fiveControlCsAtATerminalReachTheChildAtMostFiveTimes() throws {
        let directory = SidecarFixtures.temporaryDirectory("ctrl-c")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let log = directory + "/signals"
        // `run` is the session leader on a pty (the terminal's foreground group), as in a shell.
        let driver = """
            import os, pty, select, sys, time
            log = sys.argv[1]
            def count():
                try:
                    return [l for l in open(log).read().split("\\n") if l == "2"]
                except OSError:
                    return []
            def ready():
                try:
                    return "ready" in open(log).read()
                except OSError:
                    return False
            pid, master = pty.fork()
            if pid == 0:
                os.execv(sys.argv[2], sys.argv[2:])
            output = b""
            def wait(predicate, seconds=10):
                # Drain the terminal while waiting, so that run's output never fills it.
                global output
                end = time.time() + seconds
                while time.time() < end and not predicate():
                    if select.select([master], [], [], 0.005)[0]:
                        try:
                            output += os.read(master, 65536)
                        except OSError:
                            pass
                return predicate()
            started = wait(ready, 20)
            for i in range(5):
                os.write(master, b"\\x03")
                wait(lambda: len(count()) > i, 5)
            wait(lambda: False, 0.5)  # room for a second copy of the last one to arrive
            seen = len(count())
            os.kill(pid, 15)
            os.waitpid(pid, 0)
            print("ready=%s seen=%d" % (started, seen))
            print(output[-2000:].decode("utf-8", "replace"))
            """
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = ["-c", driver, log, Self.stallwatch, "run", "--proc", "--"] + Self.countingChild(log: log)
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(output.contains("ready=True"), "\(output)")
        #expect(output.contains("seen=5"), "each ^C once, not once from the terminal and once forwarded: \(output)")
    }

    @Test(.timeLimit(.minutes(3)))
    func userAndHangupSignalsAreForwardedAndDoNotKillRun() throws {
        let directory = SidecarFixtures.temporaryDirectory("forward")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let log = directory + "/signals"
        let run = try Spawned(Self.stallwatch, ["run", "--proc", "--"] + Self.countingChild(log: log))
        #expect(Self.waitFor { Self.lines(log).contains("ready") })
        for (index, signal) in [SIGUSR1, SIGUSR2, SIGHUP, SIGWINCH].enumerated() {
            kill(run.pid, signal)
            #expect(Self.waitFor { Self.lines(log).count == index + 2 }, "signal \(signal) reached the child")
        }
        #expect(Self.lines(log) == ["ready", "\(SIGUSR1)", "\(SIGUSR2)", "\(SIGHUP)", "\(SIGWINCH)"])
        #expect(run.process.isRunning, "run survived them")
        kill(run.pid, SIGTERM)
        #expect(run.wait(timeout: .seconds(10)) == 128 + SIGTERM)
    }

    /// ^Z (SIGTSTP) of a sidecar sampling every millisecond, 100 times: each time it stops, the target runs.
    @Test(.timeLimit(.minutes(2)), .tags(.slow))
    func stoppingTheSidecarMidCaptureNeverLeavesTheTargetInTracingStop() throws {
        let directory = SidecarFixtures.temporaryDirectory("tstp")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let target = try Spawned(
            SidecarFixtures.executable("stallwatch-demo"),
            ["stall", "--kind", "cpu", "--duration-ms", "60000", "--delay-ms", "200", "--no-watchdog"],
            environment: ["STALLWATCH_HEARTBEAT_DIRECTORY": directory, "STALLWATCH_REPORT_DIRECTORY": directory])
        let watch = try Spawned(
            Self.stallwatch,
            [
                "watch", "--pid", "\(target.pid)", "--threshold-ms", "50", "--sample-interval-ms", "1",
                "--heartbeat-dir", directory, "--report-dir", directory,
            ],
            environment: ["STALLWATCH_MAX_SAMPLES": "10000", "STALLWATCH_MAX_THREADS": "0"])
        #expect(watch.waitFor("\"began\""), "watch: \(watch.stderr) \(watch.stdout.prefix(500))")
        var trials = 0
        var traced = 0
        var generator = SeededGenerator()
        let deadline = ContinuousClock.now + .seconds(90)
        while trials < 100, ContinuousClock.now < deadline {
            kill(watch.pid, SIGTSTP)
            guard Self.waitFor({ SidecarFixtures.traceState(pid: watch.pid)?.state == "T" }, timeout: .seconds(10))
            else { break }
            if let state = SidecarFixtures.traceState(pid: target.pid), state.state == "t" || state.tracer != "0" {
                traced += 1
            }
            trials += 1
            kill(watch.pid, SIGCONT)
            #expect(Self.waitFor({ SidecarFixtures.traceState(pid: watch.pid)?.state != "T" }, timeout: .seconds(10)))
            // Land the next stop at a different point of the capture cycle.
            usleep(UInt32.random(in: 0...3_000, using: &generator))
        }
        #expect(trials == 100, "the sidecar stopped \(trials) times")
        #expect(traced == 0, "the target was left in tracing stop \(traced) of \(trials) times")
    }
}

extension Tag {
    /// Stress tests: bounded, but longer than the rest.
    @Tag static var slow: Self
}
