// The sidecar started while a loop is already stuck, and started on idle services of several runtimes.
import CStallWatchCore
import Foundation
import StallWatch
import StallWatchTestSupport
import Testing

@testable import StallWatchSidecar

#if canImport(Glibc)
    import Glibc
#endif

/// Watching that starts mid-incident: `Fixtures/corpus/stuck_service.c`, `lock_deadlock.py` (two
/// `threading.Lock`s) and `logging_stuck.py` (a `logging` handler's lock) get stuck before the watcher starts, and
/// idle services (C epoll, poll and condition-wait loops, a Python socketserver and queue worker, a Node HTTP
/// server) are watched from their idle state into one late stall. Slow: the idle services idle 30 s (at once).
@Suite(.offPool, .serialized) struct CorpusArrivalTests {
    static let thresholdMs = 250
    /// The sidecar's default poll interval, a fifth of the threshold.
    static let intervalMs = thresholdMs / 5
    /// How long each stall has lasted when the watcher starts (the program's own clock).
    static let stuckBeforeAttachMs = 1500

    static let binary: String? = {
        let out = SidecarFixtures.temporaryDirectory("stuck-service") + "/stuck_service"
        let source = CorpusHarness.fixture("stuck_service.c")
        let build = Process()
        build.executableURL = URL(fileURLWithPath: "/bin/sh")
        build.arguments = ["-c", "cc -O2 -pthread -o '\(out)' '\(source)'"]
        guard (try? build.run()) != nil else { return nil }
        build.waitUntilExit()
        return build.terminationStatus == 0 ? out : nil
    }()

    /// One way of being stuck, and the cause a right report gives it.
    struct Stuck: Sendable, CustomTestStringConvertible {
        let mode: String
        let cause: StallReport.Cause.Kind
        var blocked = false
        var deadlock = false
        /// The kernel tells how long the thread has not run (it is blocked, not on a CPU).
        var blockedInKernel = true
        /// How certain a deadlock is, when its locks record no owner.
        var certainty: StallReport.Cause.Certainty? = nil
        /// The program, when it is not `stuck_service MODE`.
        var command: [String]? = nil
        /// The name of the thread named first among the candidate holders, `likely`.
        var likelyHolder: String? = nil
        /// Variables set for the program.
        var environment: [String: String] = [:]
        var testDescription: String { mode }
    }

    static let stuckCases: [Stuck] = [
        Stuck(mode: "mutex", cause: .lock, blocked: true),
        Stuck(mode: "deadlock", cause: .deadlock, blocked: true, deadlock: true),
        Stuck(mode: "pipe", cause: .io),
        Stuck(mode: "sleep", cause: .sleep),
        Stuck(mode: "spin", cause: .cpu, blockedInKernel: false),
        // A file lock another process keeps: never a loop's idle wait, however early the watcher looks.
        Stuck(mode: "flock", cause: .lock),
        // A loop thread and a worker deadlocked on two `threading.Lock`s: POSIX semaphores, which record no owner.
        Stuck(
            mode: "python threading.Lock deadlock", cause: .deadlock, deadlock: true, certainty: .likely,
            command: ["/usr/bin/env", "python3", CorpusHarness.fixture("lock_deadlock.py")]),
        // A loop thread waiting for a `logging` handler's lock (a `threading.RLock`, whose semaphore records no
        // owner) that a thread keeps while a log collector does not answer: the RLock records its holder.
        Stuck(
            mode: "python logging handler lock", cause: .lock,
            command: ["/usr/bin/env", "python3", CorpusHarness.fixture("logging_stuck.py")], likelyHolder: "audit"),
        // A loop thread waiting for a `threading.Lock` (a semaphore: no owner recorded anywhere in the lock) that a
        // refresh thread keeps while an upstream does not answer, in a service started with the lock book
        // preloaded: it recorded the refresh thread as the semaphore's last taker, so the first look knows the wait
        // for a held lock, not the loop's idle wait.
        Stuck(
            mode: "python threading.Lock with the lock book", cause: .lock,
            command: ["/usr/bin/env", "python3", CorpusHarness.fixture("lock_stuck.py")], likelyHolder: "cache-refresh",
            environment: ["LD_PRELOAD": SidecarFixtures.executable("libStallWatchLockBook.so")]),
    ]

    /// The loop has been stuck 1.5 s when the watcher starts: one report with the right cause, detected within
    /// twice the threshold and one poll interval of the start of watching, marked as begun before the watch, its
    /// start never before the program's own and, for a thread blocked in the kernel, its duration at detection
    /// within 20 % of the program's own (a spinning thread's start is the first look: only a lower bound).
    @Test(.timeLimit(.minutes(2)), arguments: stuckCases)
    func aLoopAlreadyStuckWhenWatchingStartsIsReportedOnceInTime(_ c: Stuck) throws {
        let binary = try #require(Self.binary, "cc could not build the fixture")
        let directory = SidecarFixtures.temporaryDirectory("arrival-\(c.mode)")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let command = c.command ?? [binary, c.mode]
        let target = try Spawned(command[0], Array(command.dropFirst()), environment: c.environment)
        defer { kill(target.pid, SIGKILL) }
        try #require(target.waitFor("STUCK"), "\(c.mode) did not get stuck: \(target.stderr)")
        // The thread's blocked time is read on its CPU's task clock, which leaves out that CPU's interrupt and
        // stolen time (/proc/stat's irq, softirq and steal): counted from here on.
        let lossAtStuck = SidecarFixtures.taskClockLossMs()
        let stuckAt = try #require(Self.stamp(target.stdout), "no time in \(target.stdout)")
        // The incident has been going on for a while when the on-call engineer starts watching.
        while TracingMonitor.now() < stuckAt + UInt64(Self.stuckBeforeAttachMs) * 1_000_000 { usleep(10_000) }
        let attachAt = TracingMonitor.now()
        let (watcher, _, done, badStates) = try SidecarIntegrationTests.watch(Self.options(pid: target.pid, directory))
        let detected = pollUntil(timeout: .seconds(10), every: .milliseconds(10)) {
            !SidecarFixtures.reports(in: directory).isEmpty
        }
        // How long the loop thread still ran or waited for a CPU after its stamp, by the kernel's count: it blocked
        // at most that long after the stamp (a loaded machine may keep it from its blocking call for a while).
        let atStamp = Self.stuckLine(target.stdout) ?? []
        let cpu = SidecarFixtures.processor(pid: target.pid, tid: target.pid) ?? 0
        let lostMs = max(0, (SidecarFixtures.taskClockLossMs()[cpu] ?? 0) - (lossAtStuck[cpu] ?? 0)) + 10
        let now = (try? String(contentsOfFile: "/proc/\(target.pid)/task/\(target.pid)/schedstat", encoding: .utf8))
            .map { $0.split(separator: " ").compactMap { UInt64($0.trimmingCharacters(in: .whitespacesAndNewlines)) } }
        let afterStamp = now.flatMap { now -> UInt64? in
            guard atStamp.count == 3, now.count >= 2, now[0] >= atStamp[1], now[1] >= atStamp[2] else { return nil }
            return (now[0] - atStamp[1]) + (now[1] - atStamp[2])
        }
        // A second look, one second on: the stall goes on and must stay one report.
        usleep(1_000_000)
        kill(target.pid, SIGKILL)
        _ = target.wait(timeout: .seconds(10))
        watcher.stop()
        #expect(done.wait(timeout: .now() + 10) == .success)
        #expect(badStates.withLock { $0 }.isEmpty, "target stopped or traced: \(badStates.withLock { $0 })")
        try #require(detected, "no report for a loop stuck in \(c.mode)")
        let reports = SidecarFixtures.reports(in: directory)
        try #require(reports.count == 1, "\(reports.map(CorpusHarness.describe))")
        let report = reports[0]
        // A spin on a machine that kept it off the CPU is `starved`, by the documented rule (matches(_:)).
        #expect(report.cause?.matches(c.cause) == true, "\(CorpusHarness.describe(report))")
        let latencyMs = (report.detection.detectedAt.timeIntervalSince1970 - Double(attachAt) / 1e9) * 1000
        #expect(
            latencyMs <= Double(2 * Self.thresholdMs + Self.intervalMs),
            "detected \(Int(latencyMs)) ms after watching started")
        #expect(report.startedBeforeAttach == true, "\(CorpusHarness.describe(report))")
        let detectedAt = report.detection.detectedAt.timeIntervalSince1970
        let trueMs = (detectedAt - Double(stuckAt) / 1e9) * 1000
        let reportedMs = (detectedAt - report.startedAt.timeIntervalSince1970) * 1000
        // A lower bound (1 ms for the rounding of the two clocks' readings)…
        #expect(reportedMs <= trueMs + 1, "reported \(Int(reportedMs)) ms at detection, truly \(Int(trueMs)) ms")
        // …within 20 % of the truth where the kernel tells it: of how long the thread has been blocked, which is
        // the program's own figure less what the thread still ran or waited for a CPU after its stamp, on its CPU's
        // task clock (less that CPU's interrupt and stolen time meanwhile).
        if c.blockedInKernel {
            let lateMs = Double(try #require(afterStamp, "the loop thread's schedstat")) / 1e6
            #expect(
                reportedMs >= 0.8 * (trueMs - lateMs - lostMs),
                """
                reported \(Int(reportedMs)) ms at detection, truly \(Int(trueMs)) ms, blocked \(Int(lateMs)) ms after, \
                CPU \(cpu) lost \(Int(lostMs)) ms
                """)
        }
        if c.blocked { #expect(report.cause?.blockingThreadId != nil, "\(CorpusHarness.describe(report))") }
        if c.deadlock {
            #expect((report.cause?.deadlockedThreadIds?.count ?? 0) >= 2, "\(CorpusHarness.describe(report))")
        }
        if let name = c.likelyHolder {
            let first = report.cause?.candidateHolders?.first
            #expect(first?.name == name && first?.confidence == .likely, "\(CorpusHarness.describe(report))")
        }
        if let certainty = c.certainty {
            #expect(report.cause?.deadlockCertainty == certainty, "\(CorpusHarness.describe(report))")
        }
    }

    /// A CPython loop stuck on a `threading.Lock` (a POSIX semaphore: no owner recorded) that the refresh thread
    /// holds, watched from 1.5 s into the incident without the lock book: the first look cannot tell that wait from
    /// a queue's idle wait and takes it as idle — and says so once, with how long the thread had been asleep in it
    /// when that could be read (at least the threshold, at most the time since the program's own stamp), while no
    /// stall is reported. A CPython socketserver idling in `poll` is told of no lock wait.
    @Test(.timeLimit(.minutes(2)))
    func aLoopFoundAsleepInAnOwnerlessLockIsSaidToBeTakenAsIdleAndAPollLoopIsNot() throws {
        let directory = SidecarFixtures.temporaryDirectory("arrival-taken-as-idle")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let target = try Spawned("/usr/bin/env", ["python3", CorpusHarness.fixture("lock_stuck.py")])
        defer { kill(target.pid, SIGKILL) }
        try #require(target.waitFor("STUCK"), "lock_stuck.py did not get stuck: \(target.stderr)")
        let stuckAt = try #require(Self.stamp(target.stdout), "no time in \(target.stdout)")
        while TracingMonitor.now() < stuckAt + UInt64(Self.stuckBeforeAttachMs) * 1_000_000 { usleep(10_000) }
        let (watcher, events, done, _) = try SidecarIntegrationTests.watch(Self.options(pid: target.pid, directory))
        let told = { () -> (call: String, blockedMs: Double?)? in
            events.withLock { events in
                events.lazy.compactMap { event -> (String, Double?)? in
                    if case .lockWaitTakenAsIdle(_, _, let call, let blocked) = event { return (call, blocked) }
                    return nil
                }.first
            }
        }
        #expect(pollUntil(timeout: .seconds(5), every: .milliseconds(10)) { told() != nil })
        let toldAt = TracingMonitor.now()
        usleep(1_000_000)
        watcher.stop()
        #expect(done.wait(timeout: .now() + 10) == .success)
        let (call, blockedMs) = try #require(told(), "no lockWaitTakenAsIdle event: \(events.withLock { $0 })")
        #expect(call == "futex")
        // How long it had been asleep is read on its CPU, which a loaded machine can keep the reader from (then the
        // event says nothing of it rather than a guess); when read, it is a lower bound past the threshold.
        if let blocked = blockedMs {
            #expect(blocked >= Double(Self.thresholdMs))
            #expect(blocked <= Double(toldAt - stuckAt) / 1e6 + 1, "asleep \(blocked) ms, stamped before that")
        }
        #expect(events.withLock { $0 }.filter { if case .lockWaitTakenAsIdle = $0 { true } else { false } }.count == 1)
        #expect(SidecarFixtures.reports(in: directory).isEmpty)

        let idle = try Spawned(
            "/usr/bin/env", ["python3", CorpusHarness.fixture("idle_service.py"), "socketserver", "30000"])
        defer { kill(idle.pid, SIGKILL) }
        try #require(idle.waitFor("READY"), "idle_service.py: \(idle.stderr)")
        usleep(UInt32(2 * Self.thresholdMs) * 1000)
        let watchedAt = sw_monotonic_ns()
        let polling = try SidecarIntegrationTests.watch(Self.options(pid: idle.pid, directory))
        // Looks taken (the watcher turns at least once a poll interval): its first look is past.
        #expect(pollUntil(timeout: .seconds(5)) { polling.watcher.lastTurnNanos > watchedAt + 500_000_000 })
        polling.watcher.stop()
        #expect(polling.done.wait(timeout: .now() + 10) == .success)
        let toldIdle = polling.events.withLock { $0 }.filter {
            if case .lockWaitTakenAsIdle = $0 { true } else { false }
        }
        #expect(toldIdle.isEmpty, "\(toldIdle)")
    }

    /// One idle service and the command that starts it; each idles `idleMs` by its own clock, then one piece of
    /// work blocks its loop 800 ms.
    struct Idle: Sendable {
        let name: String
        let command: [String]
    }

    static func idleServices(idleMs: Int) -> [Idle] {
        let python = CorpusHarness.fixture("idle_service.py")
        return [
            Idle(name: "c epoll loop", command: [binary ?? "/nonexistent", "epoll-idle", "\(idleMs)"]),
            Idle(name: "c poll loop", command: [binary ?? "/nonexistent", "poll-idle", "\(idleMs)"]),
            Idle(name: "c condition-wait loop", command: [binary ?? "/nonexistent", "cond-idle", "\(idleMs)"]),
            Idle(
                name: "python socketserver (poll)",
                command: ["/usr/bin/env", "python3", python, "socketserver", "\(idleMs)"]),
            Idle(
                name: "python queue worker (futex)", command: ["/usr/bin/env", "python3", python, "queue", "\(idleMs)"]),
            Idle(
                name: "node http server (epoll)",
                command: ["/usr/bin/node", CorpusHarness.fixture("idle_service.js"), "\(idleMs)"]),
        ]
    }

    /// Six idle services watched at once from their idle state: nothing is reported over 30 s of idling, and the
    /// one late stall of each is reported once, as starting when the service says it did.
    @Test(.timeLimit(.minutes(2)))
    func idleServicesAttachedAreNotReportedUntilTheirLateStall() throws {
        try #require(Self.binary != nil, "cc could not build the fixture")
        let idleMs = 30_000
        var runs: [(Idle, Spawned, String, TargetWatcher, DispatchSemaphore, UInt64)] = []
        defer {
            for run in runs {
                kill(run.1.pid, SIGKILL)
                try? FileManager.default.removeItem(atPath: run.2)
            }
        }
        for service in Self.idleServices(idleMs: idleMs) {
            let target = try Spawned(service.command[0], Array(service.command.dropFirst()))
            try #require(target.waitFor("READY"), "\(service.name) did not start: \(target.stderr)")
            let directory = SidecarFixtures.temporaryDirectory("arrival-idle")
            let attachAt = TracingMonitor.now()
            let (watcher, _, done, _) = try SidecarIntegrationTests.watch(Self.options(pid: target.pid, directory))
            runs.append((service, target, directory, watcher, done, attachAt))
        }
        for (service, target, directory, watcher, done, attachAt) in runs {
            let status = target.wait(timeout: .seconds(60))
            watcher.stop()
            #expect(done.wait(timeout: .now() + 10) == .success)
            #expect(status == 0, "\(service.name) exited with \(String(describing: status)): \(target.stderr)")
            let stuckAt = try #require(Self.stamp(target.stdout), "\(service.name): no stall in \(target.stdout)")
            #expect(stuckAt > attachAt, "\(service.name) stalled before it was watched")
            let reports = SidecarFixtures.reports(in: directory)
            try #require(reports.count == 1, "\(service.name): \(reports.map(CorpusHarness.describe))")
            #expect(reports[0].startedBeforeAttach == nil, "\(service.name): a late stall marked as begun before")
            // The report's stall starts at the late work (to a poll interval), not during the idle time.
            let startedMs = (reports[0].startedAt.timeIntervalSince1970 - Double(stuckAt) / 1e9) * 1000
            #expect(
                startedMs > -Double(Self.intervalMs) && startedMs < Double(Self.thresholdMs),
                "\(service.name): stall reported from \(Int(startedMs)) ms after the service's own start of it")
        }
    }

    static func options(pid: Int32, _ directory: String) -> TargetWatcher.Options {
        var configuration = StallWatchConfiguration()
        configuration.reportDirectory = directory
        configuration.thresholdMs = thresholdMs
        var options = TargetWatcher.Options(pid: pid, configuration: configuration)
        options.thresholdFixed = true
        options.mode = .proc
        return options
    }

    /// The CLOCK_REALTIME nanoseconds of the program's "STUCK <ns>" line.
    static func stamp(_ output: String) -> UInt64? { stuckLine(output)?.first }

    /// The numbers of the `STUCK` line: the stamp, then (stuck modes) the thread's CPU and run-queue ns at it.
    static func stuckLine(_ output: String) -> [UInt64]? {
        output.split(separator: "\n").first { $0.hasPrefix("STUCK ") }.map {
            $0.dropFirst(6).split(separator: " ").compactMap { UInt64($0) }
        }
    }
}
