// The sidecar against real targets: the demo (with and without a heartbeat) and an uninstrumented echo loop.
import Foundation
import StallWatch
import StallWatchTestSupport
import Testing

@testable import StallWatchSidecar

@Suite(.offPool, .serialized) struct SidecarIntegrationTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var kind: String
        var function: String
        var cause: StallReport.Cause.Kind
        var heartbeat: Bool
        var testDescription: String { "\(kind) \(heartbeat ? "heartbeat" : "proc")" }
    }

    static let cases: [Case] = [
        ("cpu", "stallOnCPU", StallReport.Cause.Kind.cpu), ("sleep", "stallInSleep", .sleep),
        ("lock", "stallOnLock", .lock),
    ]
    .flatMap { k in [true, false].map { Case(kind: k.0, function: k.1, cause: k.2, heartbeat: $0) } }

    /// Runs a watcher on its own thread until the target exits; returns its events.
    static func watch(
        _ options: TargetWatcher.Options, checkEachCapture: Bool = true,
        onEvent: @escaping @Sendable (SidecarEvent) -> Void = { _ in }
    )
        throws -> (
            watcher: TargetWatcher, events: Locked<[SidecarEvent]>, done: DispatchSemaphore, badStates: Locked<[String]>
        )
    {
        let events = Locked<[SidecarEvent]>([])
        let badStates = Locked<[String]>([])
        let watcher = try TargetWatcher(options: options) { event in
            onEvent(event)
            events.withLock { $0.append(event) }
        }
        let pid = options.pid
        if checkEachCapture {
            watcher.onCapture { _ in
                // After every capture the target runs and is traced by nobody.
                if let s = SidecarFixtures.traceState(pid: pid), s.state == "T" || s.state == "t" || s.tracer != "0" {
                    badStates.withLock { $0.append("state \(s.state) tracer \(s.tracer)") }
                }
            }
        }
        let done = DispatchSemaphore(value: 0)
        Thread {
            _ = watcher.run()
            done.signal()
        }.start()
        return (watcher, events, done, badStates)
    }

    @Test(.timeLimit(.minutes(2)), arguments: cases)
    func eachKindOfStallInTheDemoIsReportedOnceFromOutside(_ c: Case) throws {
        let directory = SidecarFixtures.temporaryDirectory("demo-\(c.kind)")
        let shm = SidecarFixtures.temporaryDirectory("shm-\(c.kind)")
        defer {
            try? FileManager.default.removeItem(atPath: directory)
            try? FileManager.default.removeItem(atPath: shm)
        }
        var arguments = [
            "stall", "--kind", c.kind, "--duration-ms", "900", "--threshold-ms", "200", "--delay-ms", "1200",
            "--no-watchdog", "--report-dir", directory,
        ]
        if !c.heartbeat { arguments.append("--no-heartbeat") }
        let demo = try Spawned(
            SidecarFixtures.executable("stallwatch-demo"), arguments,
            environment: ["STALLWATCH_HEARTBEAT_DIRECTORY": shm])
        // The heartbeat appears once the demo's loop is set up.
        if c.heartbeat {
            for _ in 0..<200 where HeartbeatReader.segmentFiles(in: shm).isEmpty { usleep(10_000) }
        } else {
            usleep(300_000)
        }
        var configuration = StallWatchConfiguration()
        configuration.reportDirectory = directory
        configuration.thresholdMs = 200
        var options = TargetWatcher.Options(pid: demo.pid, configuration: configuration)
        options.thresholdFixed = true
        options.heartbeatDirectory = shm
        let (watcher, events, done, badStates) = try Self.watch(options)
        #expect(watcher.source == (c.heartbeat ? "heartbeat" : "proc"))
        #expect(demo.wait(timeout: .seconds(30)) == 0, "demo: \(demo.stderr)")
        #expect(done.wait(timeout: .now() + 10) == .success)
        watcher.stop()

        // Besides the injected stall, a machine whose CPUs or disk other work keeps busy may hold the demo's loop up
        // on its own (off the CPU, or reading in its code as it starts): those verdicts blame nothing in the demo —
        // unless they are all there is for an injected spin, which a busy machine holds up the same way.
        let all = SidecarFixtures.reports(in: directory)
        let reports = all.blamingTheProgram(expecting: c.cause)
        try #require(reports.count == 1, "expected one report, found \(all.count): \(events.withLock { $0 })")
        let report = reports[0]
        #expect(report.status == .ended)
        #expect(report.detection.source == (c.heartbeat ? "heartbeat" : "proc"))
        #expect(report.capture.method == "ptrace")
        #expect(report.process.pid == demo.pid)
        #expect(report.loop.phase == (c.heartbeat ? "beforeTimers" : "unknown"))
        #expect(report.durationMs > 500 && report.durationMs < 1400, "duration \(report.durationMs)")
        #expect(report.capture.pauseMicrosMedian != nil)
        let symbols = report.samples.flatMap(\.frames).compactMap(\.symbol)
        #expect(
            symbols.contains { $0.contains("Stalls.\(c.function)") }, "no frame names \(c.function): \(Set(symbols))")
        #expect(report.samples.allSatisfy { $0.thread != nil }, "each sample carries the target's /proc context")
        // A spin starved by other work on the machine is `starved`, with the run queue as evidence.
        #expect(report.cause?.matches(c.cause) == true, "cause \(String(describing: report.cause))")
        #expect(
            badStates.withLock { $0 }.isEmpty, "target stopped or traced after a capture: \(badStates.withLock { $0 })")
    }

    @Test(.timeLimit(.minutes(3)))
    func aBusyHealthyLoopIsNotReportedWithoutInstrumentation() throws {
        let directory = SidecarFixtures.temporaryDirectory("echo")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let script = SidecarFixtures.fixturesDirectory.appendingPathComponent("echo_loop.py").path
        let echo = try Spawned("/usr/bin/env", ["python3", script])
        #expect(echo.waitFor("READY"))
        var configuration = StallWatchConfiguration()
        configuration.reportDirectory = directory
        configuration.thresholdMs = 100
        var options = TargetWatcher.Options(pid: echo.pid, configuration: configuration)
        options.thresholdFixed = true
        options.mode = .proc
        let (watcher, events, done, _) = try Self.watch(options)
        usleep(3_000_000)
        watcher.stop()
        #expect(done.wait(timeout: .now() + 10) == .success)
        // A late wake-up of the watcher (a loaded machine) is a note about the watcher, not blame on the loop; nor
        // is the documented verdict of a loop the machine kept off its CPU (`starved`, with the run queue's wait
        // as its evidence and the finding that without it there would have been no stall).
        let reports = SidecarFixtures.reports(in: directory)
        let machine = Set(reports.filter { $0.cause?.isStarvedByTheMachine == true }.map(\.id))
        let stalls = events.withLock { $0 }.filter {
            switch $0 {
            case .stall(.began(let r)), .stall(.escalated(let r)), .stall(.ended(let r)): !machine.contains(r.id)
            case .stall(.sampled(let id, _, _)): !machine.contains(id)
            default: false
            }
        }
        #expect(stalls.isEmpty, "a healthy loop was blamed: \(stalls)")
        #expect(reports.allSatisfy { machine.contains($0.id) }, "\(reports.map { $0.cause?.evidence ?? [] })")
        kill(echo.pid, SIGTERM)
    }

    @Test(.timeLimit(.minutes(3)))
    func aSidecarKilledMidCaptureLeavesTheTargetRunning() throws {
        let directory = SidecarFixtures.temporaryDirectory("kill")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let demo = try Spawned(
            SidecarFixtures.executable("stallwatch-demo"),
            [
                "stall", "--kind", "cpu", "--duration-ms", "4000", "--threshold-ms", "100",
                "--delay-ms", "800", "--no-watchdog", "--no-heartbeat", "--report-dir", directory,
            ])
        usleep(200_000)
        // Sample as often as possible, so the SIGKILL most likely lands inside a capture.
        let sidecar = try Spawned(
            SidecarFixtures.executable("stallwatch"),
            [
                "watch", "--pid", "\(demo.pid)", "--threshold-ms", "100", "--sample-interval-ms", "1",
                "--report-dir", directory,
            ])
        #expect(sidecar.waitFor("\"began\""), "sidecar: \(sidecar.stdout) \(sidecar.stderr)")
        // `began` is told before the provisional report is on disk (its write, with fsyncs, runs beside the
        // samples and can take long on a busy disk): kill only once the report is there, mid-sampling.
        #expect(
            ProcessDumpTests.eventually { SidecarFixtures.reports(in: directory).first?.status == .ongoing },
            "no provisional report was written: \(sidecar.stderr)")
        kill(sidecar.pid, SIGKILL)
        // The kernel detaches a dead tracer's tracees as it exits, before it can be reaped.
        #expect(sidecar.wait(timeout: .seconds(5)) != nil, "the sidecar did not die")
        let state = try #require(SidecarFixtures.traceState(pid: demo.pid))
        #expect(state.state != "T" && state.state != "t", "target left stopped: \(state)")
        #expect(state.tracer == "0")
        #expect(demo.wait(timeout: .seconds(30)) == 0, "the demo finishes its stall and exits normally")
        // The provisional report the sidecar wrote at detection is still there.
        #expect(SidecarFixtures.reports(in: directory).first?.status == .ongoing)
    }

    @Test(.timeLimit(.minutes(3)))
    func theDaemonPicksUpPublishersAndDropsExitedOnes() throws {
        let directory = SidecarFixtures.temporaryDirectory("daemon")
        let shm = SidecarFixtures.temporaryDirectory("daemon-shm")
        defer {
            try? FileManager.default.removeItem(atPath: directory)
            try? FileManager.default.removeItem(atPath: shm)
        }
        // A stale, hostile file sits in the directory from the start: skipped, not fatal.
        _ = FileManager.default.createFile(atPath: "\(shm)/stallwatch.1", contents: Data(repeating: 7, count: 128))
        var configuration = StallWatchConfiguration()
        configuration.reportDirectory = directory
        let skipped = Locked<[String]>([])
        let daemon = SidecarDaemon(directory: shm, configuration: configuration, scanInterval: .milliseconds(50)) {
            event in
            if case .skipped(let path, _) = event { skipped.withLock { $0.append(path) } }
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
        let demo = try Spawned(
            SidecarFixtures.executable("stallwatch-demo"),
            [
                "stall", "--kind", "sleep", "--duration-ms", "700", "--threshold-ms", "150",
                "--delay-ms", "800", "--no-watchdog", "--report-dir", directory,
            ],
            environment: ["STALLWATCH_HEARTBEAT_DIRECTORY": shm])
        var picked = false
        for _ in 0..<300 where !picked {
            picked = daemon.watchedPIDs.contains(demo.pid)
            usleep(10_000)
        }
        #expect(picked)
        #expect(demo.wait(timeout: .seconds(30)) == 0)
        var dropped = false
        for _ in 0..<300 where !dropped {
            dropped = !daemon.watchedPIDs.contains(demo.pid)
            usleep(10_000)
        }
        #expect(dropped)
        let reports = SidecarFixtures.reports(in: directory)
        #expect(reports.count == 1 && reports.first?.detection.source == "heartbeat")
        #expect(skipped.withLock { $0 } == ["\(shm)/stallwatch.1"])
    }

    @Test(.timeLimit(.minutes(3)))
    func theDaemonRemovesSegmentsLeftByProcessesThatNoLongerExist() throws {
        let shm = SidecarFixtures.temporaryDirectory("daemon-stale")
        defer { try? FileManager.default.removeItem(atPath: shm) }
        // A publisher that was SIGKILLed leaves its segment behind: the pid of a process that has exited.
        let finished = try Spawned("/bin/true", [])
        #expect(finished.wait() == 0)
        let stale = "\(shm)/stallwatch.\(finished.pid)"
        _ = FileManager.default.createFile(
            atPath: stale, contents: Data(HeartbeatReaderTests.validBytes(pid: finished.pid)))
        // A live pid's file (here pid 1, not ours to judge) is skipped, never removed.
        let alive = "\(shm)/stallwatch.1"
        _ = FileManager.default.createFile(atPath: alive, contents: Data(repeating: 7, count: 128))
        let removed = Locked<[String]>([])
        let gone = DispatchSemaphore(value: 0)
        let daemon = SidecarDaemon(
            directory: shm, configuration: StallWatchConfiguration(), scanInterval: .milliseconds(50)
        ) {
            event in
            if case .removedStale(let path, _) = event {
                removed.withLock { $0.append(path) }
                gone.signal()
            }
        }
        let done = DispatchSemaphore(value: 0)
        Thread {
            try? daemon.run()
            done.signal()
        }.start()
        #expect(gone.wait(timeout: .now() + 10) == .success)
        daemon.stop()
        #expect(done.wait(timeout: .now() + 10) == .success)
        #expect(removed.withLock { $0 } == [stale])
        #expect(!FileManager.default.fileExists(atPath: stale))
        #expect(FileManager.default.fileExists(atPath: alive))
    }
}
