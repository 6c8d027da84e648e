// The loop adapters in this process: a Foundation RunLoop on a thread, and the ping probe on a serial queue.
import CStallWatchCore
import CoreFoundation
import Dispatch
import Foundation
import StallWatchTestSupport
import Synchronization
import Testing

@testable import StallWatch

@Suite(.offPool, .serialized) struct LoopAdapterTests {
    func configuration(_ directory: String, thresholdMs: Int) -> StallWatchConfiguration {
        var config = StallWatchConfiguration()
        config.thresholdMs = thresholdMs
        config.reportDirectory = directory
        config.dedupWindowMs = 0  // every stall gets its own report
        return config
    }

    /// A thread running its own Foundation RunLoop (kept alive by a timer) until `stop` is set.
    final class RunLoopThread: @unchecked Sendable {
        let stop = Atomic<Bool>(false)
        private(set) var cfRunLoop: CFRunLoop!
        private let ready = DispatchSemaphore(value: 0)

        init() {
            let thread = Thread { [self] in
                cfRunLoop = CFRunLoopGetCurrent()
                let keepAlive = Timer(timeInterval: 0.05, repeats: true) { _ in }
                RunLoop.current.add(keepAlive, forMode: .default)
                ready.signal()
                while !stop.load(ordering: .acquiring) {
                    _ = RunLoop.current.run(mode: .default, before: Date(timeIntervalSinceNow: 0.2))
                }
                keepAlive.invalidate()
            }
            thread.name = "test-runloop"
            thread.start()
            ready.wait()
        }

        /// Runs `block` on the run loop's thread.
        func perform(_ block: @escaping @Sendable () -> Void) {
            CFRunLoopPerformBlock(cfRunLoop, kCFRunLoopDefaultMode as CFTypeRef, block)
            CFRunLoopWakeUp(cfRunLoop)
        }
    }

    @Test(.timeLimit(.minutes(3)))
    func aFoundationRunLoopStuckInACalloutIsReportedOnceAndANestedRunIsNot() throws {
        let directory = Fixtures.temporaryDirectory("runloop")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let runLoop = RunLoopThread()
        defer { runLoop.stop.store(true, ordering: .releasing) }
        let monitor = FoundationRunLoopMonitor(cfRunLoop: runLoop.cfRunLoop, name: "foundation")
        monitor.start()
        monitor.annotate("route", "/sessions")
        let ended = DispatchSemaphore(value: 0)
        let events = Recorder<String>()
        // The watchdog's late wake-ups, for a failure to say whether the guard withheld judgement.
        let late = Recorder<String>()
        let watchdog = Watchdog(loop: monitor, configuration: configuration(directory, thresholdMs: 100)) { event in
            switch event {
            case .began: events.append("began")
            case .ended:
                events.append("ended")
                ended.signal()
            case .lateWakeup(let delayMs): late.append("\(delayMs) ms")
            default: break
            }
        }
        try watchdog.start()
        defer {
            watchdog.stop()
            monitor.stop()
        }
        // A callout that runs the loop again for 400 ms: the loop keeps turning, so no stall.
        let nestedDone = DispatchSemaphore(value: 0)
        runLoop.perform {
            _ = RunLoop.current.run(mode: .default, before: Date(timeIntervalSinceNow: 0.4))
            nestedDone.signal()
        }
        #expect(nestedDone.wait(timeout: .now() + 10) == .success)
        #expect(events.values.isEmpty, "a nested run is not a stall: \(events.values)")

        runLoop.perform { WatchdogTests.blockLoopThread(milliseconds: 400) }
        #expect(ended.wait(timeout: .now() + 20) == .success, "late wake-ups of the watchdog: \(late.values)")
        #expect(events.values == ["began", "ended"])
        let reports = try Fixtures.reports(in: directory)
        try #require(reports.count == 1)
        let report = reports[0]
        #expect(report.status == .ended)
        #expect(report.loop.name == "foundation")
        #expect(report.durationMs >= 360 && report.durationMs <= 600, "duration \(report.durationMs)")
        #expect(report.annotations["route"] == "/sessions")
        #expect(report.loop.threadId == monitor.sampledThread?.threadID)
        let symbols = report.samples.flatMap(\.frames).compactMap(\.symbol)
        #expect(
            symbols.contains { $0.contains("blockLoopThread") },
            "\(symbols) \(report.capture.errors) \(report.samples.map(\.error))")
        #expect((monitor.iterations ?? 0) > 0)
    }

    @Test func aMainQueueThatNobodyDrainsIsHeldUpByTheLivingMainThreadAndAnotherQueueByNoThread() throws {
        // This process's main thread lives (the test runner's); the queues are not being drained by anyone else.
        let main = MainQueueProbe(name: "main", interval: .milliseconds(100))
        #expect(main.sampledThread?.threadID == getpid())
        let other = MainQueueProbe(name: "other", interval: .milliseconds(100), queue: DispatchQueue(label: "idle"))
        #expect(other.sampledThread == nil)
    }

    /// A queue whose ping waits behind 400 ms of CPU work on the serial queue it targets: no thread drains the
    /// probed queue during the stall, so no stack is taken; the report says so and names the thread that took the
    /// queue up at its end (the one that ran the work), giving no cause of the queue's own.
    @Test(.timeLimit(.minutes(2)))
    func aQueueNoThreadDrainsIsReportedWithoutAStackNamingTheThreadThatTookItUp() throws {
        let directory = Fixtures.temporaryDirectory("probe-undrained")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let holder = DispatchQueue(label: "test.holder")
        let queue = DispatchQueue(label: "test.undrained", target: holder)
        let probe = MainQueueProbe(name: "undrained", interval: .milliseconds(20), queue: queue)
        let ended = DispatchSemaphore(value: 0)
        let watchdog = Watchdog(loop: probe, configuration: configuration(directory, thresholdMs: 100)) { event in
            if case .ended = event { ended.signal() }
        }
        probe.start()
        try watchdog.start()
        defer {
            watchdog.stop()
            probe.stop()
        }
        #expect(pollUntil { (probe.iterations ?? 0) >= 3 })
        let worker = Atomic<Int32>(0)
        holder.async {
            worker.store(sw_gettid(), ordering: .releasing)
            let end = sw_monotonic_ns() + 400_000_000
            while sw_monotonic_ns() < end {}
        }
        #expect(ended.wait(timeout: .now() + 20) == .success)
        let report = try #require(try Fixtures.reports(in: directory).first { $0.status == .ended })
        #expect(report.notes.contains { $0.contains("no thread was draining the queue") }, "\(report.notes)")
        #expect(report.samples.allSatisfy { $0.frames.isEmpty }, "\(report.samples)")
        #expect(report.loop.threadId == worker.load(ordering: .acquiring))
        let cause = try #require(report.cause)
        #expect(cause.kind == .unknown, "\(cause)")
        #expect(cause.evidence.contains { $0.contains("took it up") }, "\(cause.evidence)")
    }

    @Test(.timeLimit(.minutes(2)))
    func theProbeDetectsAStuckQueueWithinThresholdPlusInterval() throws {
        let directory = Fixtures.temporaryDirectory("probe")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let thresholdMs = 100, intervalMs = 50
        let queue = DispatchQueue(label: "test.probed")
        let probe = MainQueueProbe(name: "probed", interval: .milliseconds(intervalMs), queue: queue)
        let began = DispatchSemaphore(value: 0)
        let ended = DispatchSemaphore(value: 0)
        let detectedAt = Atomic<UInt64>(0)
        let watchdog = Watchdog(loop: probe, configuration: configuration(directory, thresholdMs: thresholdMs)) {
            event in
            switch event {
            case .began:
                detectedAt.store(sw_monotonic_ns(), ordering: .releasing)
                began.signal()
            case .ended: ended.signal()
            default: break
            }
        }
        probe.start()
        try watchdog.start()
        defer {
            watchdog.stop()
            probe.stop()
        }
        // Let a few pings go round, so the queue's thread is known.
        let answered = probe.iterations ?? 0
        var spins = 0
        while (probe.iterations ?? 0) < answered + 3, spins < 1000 {
            queue.sync {}  // waits for the queue (and any ping on it), no sleep
            usleep(1000)  // pacing the poll of the ping counter
            spins += 1
        }

        // Stuck → detected (the detector's verdict, as the report records it) and stuck → `began` delivered
        // (after the first sample and the provisional report's fsync).
        var latencies: [Double] = []
        var delivered: [Double] = []
        var stuckWall: [String: Double] = [:]
        for _ in 0..<5 {
            let stuckAt = Atomic<UInt64>(0)
            let stuckAtWall = Mutex<Double>(0)
            queue.async {
                stuckAt.store(sw_monotonic_ns(), ordering: .releasing)
                stuckAtWall.withLock { $0 = Date().timeIntervalSince1970 }
                WatchdogTests.blockLoopThread(milliseconds: 3 * thresholdMs + intervalMs)
            }
            #expect(began.wait(timeout: .now() + 20) == .success)
            #expect(ended.wait(timeout: .now() + 20) == .success)
            // Wrapping: after a missed `began` the detection time predates this stall, and the failure is recorded above.
            let latency = detectedAt.load(ordering: .acquiring) &- stuckAt.load(ordering: .acquiring)
            delivered.append(Double(Int64(bitPattern: latency)) / 1e6)
            stuckWall["\(stuckWall.count)"] = stuckAtWall.withLock { $0 }
        }
        let reports = try Fixtures.reports(in: directory).sorted { $0.startedAt < $1.startedAt }
        #expect(reports.count == 5)
        let stuck = stuckWall.sorted { Int($0.key)! < Int($1.key)! }.map(\.value)
        for (report, stuckAt) in zip(reports, stuck) {
            latencies.append(((report.detection.detectedAt.timeIntervalSince1970 - stuckAt) * 1e5).rounded() / 100)
        }
        print(
            "main-queue probe, threshold \(thresholdMs) ms, interval \(intervalMs) ms: stuck → detected (ms)",
            latencies, "stuck → began delivered (ms)", delivered.map { ($0 * 100).rounded() / 100 })
        // Within threshold + interval, with room for a loaded machine.
        #expect(latencies.allSatisfy { $0 <= Double(thresholdMs + intervalMs) + 100 }, "\(latencies)")
        #expect(reports.allSatisfy { $0.status == .ended && $0.loop.phase == "beforeSources" })
        // Measured from the unanswered ping: short by at most one interval (plus scheduling).
        let stall = Double(3 * thresholdMs + intervalMs)
        #expect(
            reports.allSatisfy { $0.durationMs >= stall - Double(intervalMs) - 30 && $0.durationMs <= stall + 150 },
            "\(reports.map(\.durationMs))")
        // The probe reads which pool thread drains the queue from its drain lock: every stall is sampled on the
        // thread running the stuck block, and its first sample lands while the block still runs.
        for report in reports {
            let symbols = report.samples.first?.frames.compactMap(\.symbol) ?? []
            #expect(symbols.contains { $0.contains("blockLoopThread") }, "\(symbols)")
        }
    }

    @Test(.timeLimit(.minutes(3)))
    func aHealthyProbedQueueIsNeverBlamedAndStoppingPublishesExit() throws {
        let directory = Fixtures.temporaryDirectory("probe-healthy")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let queue = DispatchQueue(label: "test.healthy")
        let probe = MainQueueProbe(name: "healthy", interval: .milliseconds(5), queue: queue)
        // What concerns the queue; a late wake-up of the watchdog's own thread (a loaded machine) says nothing of it.
        let events = Recorder<StallEvent>()
        let watchdog = Watchdog(loop: probe, configuration: configuration(directory, thresholdMs: 100)) {
            if case .lateWakeup = $0 { return }
            events.append($0)
        }
        probe.start()
        try watchdog.start()
        // Short work items keep the queue busy but turning for a while.
        let done = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            for _ in 0..<400 {
                queue.async { WatchdogTests.blockLoopThread(milliseconds: 1) }
                queue.sync {}
            }
            done.signal()
        }
        #expect(done.wait(timeout: .now() + 30) == .success)
        watchdog.stop()
        probe.stop()
        // On failure, each report's cause, its evidence and its samples' top frames, not the whole event.
        let reports = (try? Fixtures.reports(in: directory)) ?? []
        let explained = reports.map { report in
            "\(report.durationMs) ms, \(report.cause?.kind.rawValue ?? "-"): \(report.cause?.evidence ?? []); samples "
                + "\(report.samples.map { $0.frames.prefix(3).compactMap(\.symbol) })"
        }
        // Nor is the documented verdict of a queue the machine kept from turning (`starved`, with the CPU wait the
        // run queue or the captures measured as its evidence): a loaded machine does hold a healthy queue up.
        let machine = Set(reports.filter { $0.cause?.isStarvedByTheMachine == true }.map(\.id))
        let blamed = events.values.filter {
            switch $0 {
            case .began(let r), .escalated(let r), .ended(let r): !machine.contains(r.id)
            case .sampled(let id, _, _): !machine.contains(id)
            default: true
            }
        }
        #expect(blamed.isEmpty, "\(blamed.count) events; reports: \(explained)")
        #expect(reports.allSatisfy { machine.contains($0.id) }, "\(explained)")
        #expect(probe.state.snapshot().activity == .exit)
        #expect((probe.iterations ?? 0) > 10)
        // Restart works, and a stopped probe leaves nothing busy behind.
        probe.start()
        probe.stop()
        #expect(!probe.state.snapshot().isBusy)
    }
}
