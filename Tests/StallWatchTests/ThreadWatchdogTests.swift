// Watching event-loop threads by name from /proc: in this process, and in the demo's epoll server.
import CStallWatchCore
import Dispatch
import Foundation
import StallWatchTestSupport
import Synchronization
import Testing

@testable import StallWatch

@Suite(.offPool, .serialized) struct ThreadWatchdogTests {
    /// An event loop StallWatch does not instrument: a thread named `name` waiting in an epoll of its own on an
    /// eventfd; each wake-up runs the next job; the thread exits after a job that returns false.
    final class EpollLoopThread: @unchecked Sendable {  // `jobs` is behind its Mutex; the rest are lets.
        let name: String
        private let wake = sw_eventfd_create()
        private let jobs = Mutex<[@Sendable () -> Bool]>([])
        let threadID = Atomic<Int32>(0)

        init(name: String) {
            self.name = name
            let ready = DispatchSemaphore(value: 0)
            let epoll = sw_epoll_create()
            #expect(wake >= 0 && epoll >= 0 && sw_epoll_add(epoll, wake, 0) == 0)
            let thread = Thread { [self] in
                setCurrentThreadName(name)
                threadID.store(sw_gettid(), ordering: .releasing)
                ready.signal()
                var fds: [Int32] = [-1, -1, -1, -1]
                var running = true
                while running {
                    guard sw_epoll_wait(epoll, &fds, 4, -1) > 0 else { continue }
                    sw_eventfd_drain(wake)
                    while running, let job = jobs.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) { running = job() }
                }
                close(epoll)
                close(wake)
            }
            thread.start()
            ready.wait()
        }

        func submit(_ job: @escaping @Sendable () -> Bool) {
            jobs.withLock { $0.append(job) }
            _ = sw_eventfd_signal(wake)
        }
    }

    /// The culprit: CPU work inside an event handler.
    @inline(never)
    static func spinInEventHandler(milliseconds: Int) {
        let end = DispatchTime.now().uptimeNanoseconds + UInt64(milliseconds) * 1_000_000
        var x: UInt64 = 1
        while DispatchTime.now().uptimeNanoseconds < end { x = x &* 6_364_136_223_846_793_005 &+ 1 }
        #expect(x != 0)
    }

    /// Waits (up to 20 s) until `condition` holds, looking every 10 ms.
    func eventually(_ condition: () -> Bool) -> Bool {
        let deadline = DispatchTime.now() + 20
        while !condition() {
            if DispatchTime.now() > deadline { return false }
            usleep(10_000)
        }
        return true
    }

    /// The voluntary context switches of thread `tid` of this process: one per wait between its looks.
    static func voluntarySwitches(ofThread tid: String) -> UInt64? {
        guard let status = try? String(contentsOfFile: "/proc/self/task/\(tid)/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("voluntary_ctxt_switches") })
        else { return nil }
        return line.split(separator: "\t").last.flatMap { UInt64($0.trimmingCharacters(in: .whitespaces)) }
    }

    /// While every watched thread sits in its idle wait, the watching thread looks twice per threshold, not five
    /// times: at a 200 ms threshold about 10 waits a second (a poll every threshold / 5 would be 25). Counted over
    /// the time the test really waited (the shared test process's pool may run the test late); a loaded machine
    /// wakes the watcher later, never more often.
    @Test(.timeLimit(.minutes(3)))
    func whileEveryWatchedThreadIdlesTheWatcherLooksTwicePerThreshold() async throws {
        let directory = Fixtures.temporaryDirectory("thread-watchdog-idle")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var config = StallWatchConfiguration()
        config.thresholdMs = 200
        config.reportDirectory = directory
        let loops = [EpollLoopThread(name: "idle-elt-0"), EpollLoopThread(name: "idle-elt-1")]
        defer { for loop in loops { loop.submit { false } } }
        let watchdog = try ThreadWatchdog(
            threadsNamed: "idle-elt-*", configuration: config, rescanInterval: .seconds(60))
        // Other suites may run thread watchdogs of their own, started at any time: ours is the one it names.
        try watchdog.start()
        defer { watchdog.stop() }
        let watcher = try #require(watchdog.watchingThreadID.map { String($0) })
        #expect(watchdog.watchedThreads.map(\.name) == ["idle-elt-0", "idle-elt-1"])
        // The idle waits are learned at the first looks; count from then on.
        try await Task.sleep(for: .milliseconds(300))
        let start = ContinuousClock.now
        let before = try #require(Self.voluntarySwitches(ofThread: watcher))
        try await Task.sleep(for: .seconds(2))
        let after = try #require(Self.voluntarySwitches(ofThread: watcher))
        let elapsed = ContinuousClock.now - start
        let elapsedMs = Double(elapsed.components.seconds) * 1e3 + Double(elapsed.components.attoseconds) / 1e15
        // One wait per 100 ms, with a third more for the look's own time and a few for the start of the count.
        #expect(Double(after - before) <= elapsedMs / 100 * 1.3 + 4, "\(after - before) waits in \(elapsedMs) ms")
        #expect(after > before)
        #expect(try Fixtures.reports(in: directory).isEmpty)
    }

    @Test(.timeLimit(.minutes(3)))
    func threadsThatAppearArePickedUpExitedOnesDroppedAndAStuckOneReportedByName() throws {
        let directory = Fixtures.temporaryDirectory("thread-watchdog")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var config = StallWatchConfiguration()
        config.thresholdMs = 100
        config.reportDirectory = directory
        config.watchThreads = "test-elt-*"
        let first = EpollLoopThread(name: "test-elt-0")
        let second = EpollLoopThread(name: "test-elt-1")
        let other = EpollLoopThread(name: "test-other")
        let ended = DispatchSemaphore(value: 0)
        let blamed = Recorder<String>()
        // On this process's wall clock, as the report's dates: the handler's start and end, and when `.ended` came.
        let handlerSpan = Recorder<Date>()
        let beganSeen = Recorder<Date>()
        let endedSeen = Recorder<Date>()
        let watchdog = try ThreadWatchdog(configuration: config, rescanInterval: .milliseconds(50)) { event in
            if case .began(let report) = event {
                beganSeen.append(Date())
                blamed.append(report.loop.name)
            }
            if case .ended = event {
                endedSeen.append(Date())
                ended.signal()
            }
        }
        try watchdog.start()
        defer { watchdog.stop() }
        #expect(watchdog.watchedThreads.map(\.name) == ["test-elt-0", "test-elt-1"])

        let third = EpollLoopThread(name: "test-elt-2")
        #expect(eventually { watchdog.watchedThreads.contains { $0.name == "test-elt-2" } })
        first.submit { false }
        #expect(eventually { !watchdog.watchedThreads.contains { $0.name == "test-elt-0" } })

        for _ in 0..<20 { second.submit { true } }  // short events keep the loop idle between them
        // The loop thread's own CPU time and run-queue wait while idle, and as its handler starts: what it spent
        // between its wake-up and the handler (mostly waiting for a CPU on a loaded machine), which the stall counts.
        let thirdTID = third.threadID.load(ordering: .acquiring)
        let idleSchedule = try #require(ProcDirectory(processID: getpid(), threadID: thirdTID).schedstat(now: 0))
        let handlerSchedule = Recorder<ThreadSchedule>()
        third.submit {
            handlerSpan.append(Date())
            if let now = ProcDirectory(processID: getpid(), threadID: sw_gettid()).schedstat(now: 0) {
                handlerSchedule.append(now)
            }
            Self.spinInEventHandler(milliseconds: 400)
            handlerSpan.append(Date())
            return true
        }
        #expect(ended.wait(timeout: .now() + 20) == .success)
        let reports = try Fixtures.reports(in: directory)
        try #require(reports.count == 1, "\(reports.map(\.loop.name))")
        let report = reports[0]
        #expect(report.loop.name == "test-elt-2")
        #expect(report.loop.threadId == third.threadID.load(ordering: .acquiring))
        #expect(report.detection.source == "proc")
        #expect(report.status == .ended)
        // From /proc the stall begins when the thread left its idle wait (dated from its CPU time and run-queue wait
        // since) and ends at the first look that sees progress: each end lies between the handler's own moment and
        // the event that announced it to us, however long the watching thread went unscheduled — the start earlier
        // by at most what the thread spent between its wake-up and the handler, by its own figures. (A millisecond
        // for the report's date precision.)
        let span = handlerSpan.values
        let endedAt = try #require(report.endedAt)
        try #require(
            span.count == 2 && beganSeen.values.count == 1 && endedSeen.values.count == 1,
            "handler span \(span), began \(beganSeen.values), ended \(endedSeen.values)")
        let atHandler = try #require(handlerSchedule.values.first)
        let wokenBeforeHandler =
            Double(
                (atHandler.cpuNanos - min(atHandler.cpuNanos, idleSchedule.cpuNanos))
                    + (atHandler.runQueueWaitNanos - min(atHandler.runQueueWaitNanos, idleSchedule.runQueueWaitNanos)))
            / 1e9
        #expect(
            report.startedAt.timeIntervalSince(span[0]) >= -0.001 - wokenBeforeHandler,
            "started \(report.startedAt), handler \(span[0]), woken \(wokenBeforeHandler) s before it")
        #expect(
            report.startedAt.timeIntervalSince(beganSeen.values[0]) <= 0.001,
            "started \(report.startedAt), event \(beganSeen.values[0])")
        #expect(endedAt.timeIntervalSince(span[1]) >= -0.001, "ended \(endedAt), handler returned \(span[1])")
        #expect(
            endedAt.timeIntervalSince(endedSeen.values[0]) <= 0.001, "ended \(endedAt), event \(endedSeen.values[0])")
        let point = report.pointStack?.frames.compactMap(\.symbol) ?? []
        let sampled =
            "\(report.samples.count) samples (\(report.samples.compactMap(\.error))), \(report.durationMs) ms, "
            + "\(report.cause?.kind.rawValue ?? "-"); notes \(report.notes)"
        #expect(point.contains { $0.contains("spinInEventHandler") }, "\(point) \(report.capture.errors); \(sampled)")
        #expect(blamed.values == ["test-elt-2"])
        try Fixtures.expectReportsValidate(in: directory)
        for loop in [second, third, other] { loop.submit { false } }
    }

    @Test func thePatternComesFromTheArgumentElseWatchThreadsOrItsEnvironmentVariable() throws {
        let fromEnvironment = try StallWatchConfiguration.load(environment: ["STALLWATCH_WATCH_THREADS": "NIO-ELT-*"])
        #expect(fromEnvironment.watchThreads == "NIO-ELT-*")
        #expect(try ThreadWatchdog(configuration: fromEnvironment).pattern == "NIO-ELT-*")
        #expect(try ThreadWatchdog(threadsNamed: "worker-*", configuration: fromEnvironment).pattern == "worker-*")
        let file = NSTemporaryDirectory() + "stallwatch-watch-threads-\(getpid()).json"
        defer { unlink(file) }
        try Data(#"{"watchThreads": "demo-elt-*"}"#.utf8).write(to: URL(fileURLWithPath: file))
        #expect(try StallWatchConfiguration.load(file: file, environment: [:]).watchThreads == "demo-elt-*")
    }

    @Test func aWatchdogWithoutAPatternIsRefused() {
        #expect(throws: StallWatchError.self) { try ThreadWatchdog(configuration: StallWatchConfiguration()) }
        #expect(!NamedThreadWatcher.matches("stallwatch-threads", "*"))
        #expect(NamedThreadWatcher.matches("NIO-ELT-0-#3", "NIO-ELT-*"))
    }

    struct DemoCase: Sendable, CustomTestStringConvertible {
        var kind: String
        var function: String
        /// Fast sampling puts samples between the threads of the all-thread snapshot: every one of those stops
        /// must be discounted, or the stall seems to end early.
        var sampleIntervalMs = 50
        var testDescription: String { "\(kind) every \(sampleIntervalMs) ms" }
    }

    @Test(
        .timeLimit(.minutes(2)),
        arguments: [
            DemoCase(kind: "cpu", function: "stallOnCPU"),
            DemoCase(kind: "cpu", function: "stallOnCPU", sampleIntervalMs: 3),
            DemoCase(kind: "lock", function: "stallOnLock"),
        ])
    func theDemosLastOfFourLoopThreadsStuckIsOneReportNamingItAndItsCulprit(_ c: DemoCase) throws {
        let directory = Fixtures.temporaryDirectory("demo-threads-\(c.kind)")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let result = try Fixtures.run(
            Fixtures.executable("stallwatch-demo"),
            [
                "stall", "--loop", "threads", "--threads", "4", "--kind", c.kind, "--duration-ms", "750",
                "--threshold-ms", "200", "--delay-ms", "300", "--report-dir", directory,
            ],
            // Without folding, a stall that seemed to end early and begin again would be a second report.
            environment: ["STALLWATCH_DEDUP_WINDOW_MS": "0", "STALLWATCH_SAMPLE_INTERVAL_MS": "\(c.sampleIntervalMs)"])
        #expect(result.status == 0, "demo failed: \(result.stderr) \(result.stdout)")
        let reports = try Fixtures.reports(in: directory)
        try #require(reports.count == 1, "\(reports.map(\.loop.name)) \(result.stdout)")
        let report = reports[0]
        #expect(report.loop.name == "demo-elt-3")
        #expect(report.detection.source == "proc")
        #expect(report.status == .ended)
        // Late by as long as the watching thread goes unscheduled; never short: the stall was not cut in two.
        let timing =
            "duration \(report.durationMs), from \(report.startedAt) (detected \(report.detection.detectedAt)); "
            + "samples at \(report.samples.map(\.offsetMs)) ms; notes \(report.notes)"
        #expect(report.durationMs >= 600 && report.durationMs <= 5000, "\(timing)")
        let point = report.pointStack?.frames.compactMap(\.symbol) ?? []
        #expect(point.contains { $0.contains("Stalls.\(c.function)") }, "\(point) \(report.capture.errors)")
        #expect(point.contains { $0.contains("handleWakeUp") }, "\(point)")
        // Every event line is about the stuck thread: the idle ones are never blamed.
        let lines = result.stdout.split(separator: "\n").filter { $0.contains(#""loop":"#) }
        #expect(!lines.isEmpty && lines.allSatisfy { $0.contains(#""loop":"demo-elt-3""#) }, "\(lines)")
        try Fixtures.expectReportsValidate(in: directory)
    }
}
