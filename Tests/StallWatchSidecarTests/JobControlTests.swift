// `stallwatch run` and `watch` under job control: ^C at a terminal, forwarded signals, ^Z during captures.
import Foundation
import StallWatch
import StallWatchTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite(.serialized) struct JobControlTests {
    static let stallwatch = SidecarFixtures.executable("stallwatch")

    /// A child that counts the signals it gets, one line per signal in `log`, and says `ready` once its
    /// handlers are in place.
    static func countingChild(log: String) -> [String] {
        let script = """
            import signal, sys, time, os
            # One raw append per signal: a buffered file's write is not reentrant, and a signal that arrives
            # while the handler of the one before is still inside it would raise.
            log = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
            def seen(number, frame):
                os.write(log, b"%d\\n" % number)
            for number in (signal.SIGINT, signal.SIGUSR1, signal.SIGUSR2, signal.SIGHUP, signal.SIGWINCH):
                signal.signal(number, seen)
            os.write(log, b"ready\\n")
            while True:
                time.sleep(0.05)
            """
        return ["/usr/bin/python3", "-c", script, log]
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
            usleep(UInt32.random(in: 0...3_000))  // land the next stop at a different point of the capture cycle
        }
        #expect(trials == 100, "the sidecar stopped \(trials) times")
        #expect(traced == 0, "the target was left in tracing stop \(traced) of \(trials) times")
    }
}

extension Tag {
    /// Stress tests: bounded, but longer than the rest.
    @Tag static var slow: Self
}
