// stallwatch-demo: a service loop with StallWatch embedded that stalls on demand, and a chat service with its load.
import Foundation
import StallWatch
import Synchronization

let usage = """
    usage: stallwatch-demo stall --kind cpu|sleep|lock|io|deadlock|contention|reentrant|swift-mutex|wait|hung-await|lead-up
                                 [--duration-ms N] [--threshold-ms N] [--delay-ms N]
                                 [--repeat N] [--report-dir DIR] [--strategy deadline|classic]
                                 [--no-watchdog] [--no-heartbeat]
                                 [--loop stallwatch|foundation|dispatch-main|concurrency|threads]
                                 [--threads N] [--probe-interval-ms N] [--cycling-tasks N] [--resume-after-ms N]
                                 [--sampling-signal default|ignore|handler] [--block-signals]

    Runs a StallWatch loop with the watchdog embedded, waits --delay-ms (default 500) with the loop idle, then
    stalls the loop --repeat times (default 1) for --duration-ms (default 750) inside a function named after the
    kind, idle in between; exits 0 once every injected stall has a final report (other stalls a loaded machine
    adds are reported, not counted). One JSON line per stall event on stdout.
    --no-watchdog: no embedded watchdog (a target for `stallwatch watch`); the heartbeat segment is still
    published, and the demo exits twice the threshold after the last stall. --no-heartbeat: publish none.
    --loop picks the loop: StallWatch's EventLoop (default), Foundation's RunLoop.main, or dispatchMain() alone
    watched by a main-queue probe pinging every --probe-interval-ms (default 100), the Swift Concurrency pool, or
    an epoll server on --threads (default 4) event-loop threads named demo-elt-<i>, watched by name from /proc
    (the last one stalls; every kind but io).
    --sampling-signal: once the watchdog runs, set StallWatch's sampling signal to SIG_DFL, SIG_IGN or a handler
    of the demo's own. --block-signals: the loop thread blocks every signal before its first stall.
    --kind lead-up (StallWatch's loop only): each stall is preceded by `warmCaches`, 400 ms on the CPU in the turn
    before, under the threshold (500 ms unless --threshold-ms or STALLWATCH_THRESHOLD_MS sets another); the stall is then
    `stallOnCPU`, and its report's lead-up shows warmCaches just before it.
    --loop concurrency --kind hung-await: no thread stalls; among --cycling-tasks (default 1,000) tasks cycling
    through Task.sleep(10 ms), an AsyncStream consumer and a Task.sleep(30 s), three tasks wait forever
    (awaitReplyThatNeverComes, awaitFirstTask on the first, groupChildWaits); --resume-after-ms N adds a fourth
    (awaitReplyThatComesLate) resumed after N ms. One JSON line per waiting task once it is suspended, with its
    task id (for `stallwatch tasks -p PID`), and one per hung-await report event (hungAwaitThresholdMs, 10 s by
    default); exits 0 once the three are reported (and the fourth's report ended) and --duration-ms has passed.
    """

func fail(_ message: String, code: Int32 = 2) -> Never {
    FileHandle.standardError.write(Data("stallwatch-demo: \(message)\n".utf8))
    exit(code)
}

struct StallCommand {
    var kind = StallKind.cpu
    var durationMs = 750
    var delayMs = 500
    var repeatCount = 1
    var watchdogEnabled = true
    var loop = DemoLoop.stallwatch
    var probeIntervalMs = 100
    var threadCount = 4
    var cyclingTasks = 1000
    var resumeAfterMs: Int?
    var signalChange: SamplingSignalChange?
    var blockSignals = false
    var configuration: StallWatchConfiguration
    /// Whether the threshold was set (by the flag, or a configuration other than the default): else
    /// `--kind lead-up` raises it to 500 ms.
    var thresholdGiven = false

    init(arguments: [String]) {
        configuration = loadConfiguration()
        var args = CommandArguments(arguments, usage: usage)
        while let arg = args.next() {
            switch arg {
            case "--kind": kind = args.choice(arg, StallKind.self)
            case "--duration-ms": durationMs = args.number(arg, 1...3_600_000)
            case "--delay-ms": delayMs = args.number(arg, 0...3_600_000)
            case "--repeat": repeatCount = args.number(arg, 1...10_000)
            case "--loop": loop = args.choice(arg, DemoLoop.self)
            case "--probe-interval-ms": probeIntervalMs = args.number(arg, 1...60_000)
            case "--threads": threadCount = args.number(arg, 1...64)
            case "--cycling-tasks": cyclingTasks = args.number(arg, 0...100_000)
            case "--resume-after-ms": resumeAfterMs = args.number(arg, 1...3_600_000)
            case "--threshold-ms":
                args.override(&configuration, "thresholdMs", flag: arg)
                thresholdGiven = true
            case "--report-dir": args.override(&configuration, "reportDirectory", flag: arg)
            case "--strategy": args.override(&configuration, "strategy", flag: arg)
            case "--no-watchdog": watchdogEnabled = false
            case "--no-heartbeat": configuration.heartbeat = false
            case "--sampling-signal": signalChange = args.choice(arg, SamplingSignalChange.self)
            case "--block-signals": blockSignals = true
            case "-h", "--help":
                print(usage)
                exit(0)
            default: fail("unknown argument \(arg)\n\(usage)")
            }
        }
        if kind == .leadUp && !thresholdGiven && configuration.thresholdMs == StallWatchConfiguration().thresholdMs {
            try? configuration.override("thresholdMs", with: String(Stalls.leadUpThresholdMs), flag: "--kind lead-up")
        }
    }

    func run() -> Never {
        if kind == .leadUp && loop != .stallwatch { fail("--kind lead-up needs --loop stallwatch") }
        if loop == .foundation { runOnFoundationRunLoop() }
        if loop == .dispatchMain { runOnDispatchMain() }
        if loop == .concurrency { runOnConcurrencyPool() }
        if kind == .hungAwait { fail("--kind hung-await needs --loop concurrency") }
        if loop == .threads { runOnEventLoopThreads() }
        let loop: EventLoop
        do {
            loop = try EventLoop(name: "demo")
        } catch {
            fail(error.message, code: 1)
        }
        let kind = kind, durationMs = durationMs, repeatCount = repeatCount, delayMs = delayMs
        let watchdog = Watchdog(loop: loop, configuration: configuration) { event in
            EventPrinter.print(event)
            if case .ended(let report) = event, InjectedStalls.shared.cover(report) == repeatCount {
                loop.perform { loop.stop() }
            }
        }
        var heartbeat: HeartbeatPublisher?
        do {
            if watchdogEnabled {
                try watchdog.start()
            } else if configuration.heartbeat {
                heartbeat = try HeartbeatPublisher.publish(loop: loop, configuration: configuration)
            }
        } catch {
            fail(error.message, code: 1)
        }
        signalChange?.apply()
        if blockSignals { loop.perform { blockEverySignal() } }
        // Stall, then idle for twice the threshold so the end is seen and the report finished, then stall again.
        let gap = Duration.milliseconds(max(delayMs, 2 * configuration.thresholdMs))
        // The lead-up kind runs warmCaches before each stall.
        let lead = kind == .leadUp ? Stalls.warmCachesMs : 0
        let slotMs = durationMs + lead
        for index in 0..<repeatCount {
            let at = Duration.milliseconds(delayMs) + (gap + .milliseconds(slotMs)) * index
            loop.schedule(after: at) {
                if kind == .leadUp {
                    Stalls.runAfterWarmingCaches(on: loop, durationMs: durationMs)
                } else {
                    Stalls.run(kind, durationMs: durationMs)
                }
            }
        }
        if !watchdogEnabled {
            // Nobody inside reports the end: stop once a sidecar has had time to see the last stall end.
            let last = Duration.milliseconds(delayMs) + (gap + .milliseconds(slotMs)) * (repeatCount - 1)
            loop.schedule(after: last + .milliseconds(slotMs) + gap) { loop.stop() }
        }
        // A safety net: never hang the demo if a report does not come.
        let limit = Duration.milliseconds(delayMs) + (gap + .milliseconds(slotMs)) * repeatCount + .seconds(30)
        let result = loop.run(for: limit)
        watchdog.stop()
        heartbeat?.withdraw()
        if result == .timedOut {
            fail(
                "timed out waiting for the reports of \(repeatCount) stall(s); "
                    + "\(InjectedStalls.shared.reported) arrived", code: 1)
        }
        exit(0)
    }
}

/// Counts the stalls that ended, from the watchdog's thread; read from the loop.
final class EndedCounter: Sendable {
    private let count = Atomic<Int>(0)
    /// - Returns: The count after this one.
    func increment() -> Int { count.add(1, ordering: .acquiringAndReleasing).newValue }
    var value: Int { count.load(ordering: .acquiring) }
}

/// The stalls this run injected (``Stalls/run(_:durationMs:)``), by their wall-clock times, and which of them an
/// ended report covers: a `--repeat N` run ends once each of its N stalls is reported, whatever other stalls a
/// loaded machine adds (a queue waiting for a pool thread, a loop starved of a CPU), which must not count.
final class InjectedStalls: Sendable {
    static let shared = InjectedStalls()
    private let state = Mutex<(intervals: [(start: Date, end: Date?)], covered: Set<Int>)>(([], []))

    /// An injected stall begins now; returns its index for ``end(_:)``.
    func begin() -> Int {
        state.withLock { state in
            state.intervals.append((Date(), nil))
            return state.intervals.count - 1
        }
    }

    func end(_ index: Int) { state.withLock { $0.intervals[index].end = Date() } }

    /// How many injected stalls an ended report has covered.
    var reported: Int { state.withLock { $0.covered.count } }

    /// Marks the injected stalls `report` overlaps as reported; returns how many have been so far.
    func cover(_ report: StallReport) -> Int {
        let start = report.startedAt
        let end = report.endedAt ?? Date()
        return state.withLock { state in
            for (index, stall) in state.intervals.enumerated() where stall.start <= end && (stall.end ?? end) >= start {
                state.covered.insert(index)
            }
            return state.covered.count
        }
    }
}

var arguments = Array(CommandLine.arguments.dropFirst())
guard let command = arguments.first else { fail("missing command\n\(usage)") }
arguments.removeFirst()
switch command {
case "stall": StallCommand(arguments: arguments).run()
case "serve": ServeCommand(arguments: arguments).run()
case "load": LoadCommand(arguments: arguments).run()
case "-h", "--help", "help": print(usage + "\n\n" + serveUsage + "\n\n" + loadUsage)
default: fail("unknown command \(command)\n\(usage)")
}
