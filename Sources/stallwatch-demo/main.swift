// stallwatch-demo: a service loop with StallWatch embedded that stalls on demand.
import Foundation
import StallWatch

let usage = """
    usage: stallwatch-demo stall --kind cpu|sleep|lock|io|deadlock|contention|reentrant
                                 [--duration-ms N] [--threshold-ms N] [--delay-ms N]
                                 [--repeat N] [--report-dir DIR] [--strategy deadline|classic]
                                 [--loop stallwatch|foundation|dispatch-main] [--probe-interval-ms N]

    Runs a StallWatch loop with the watchdog embedded, waits --delay-ms (default 500) with the loop idle, then
    stalls the loop --repeat times (default 1) for --duration-ms (default 750) inside a function named after the
    kind, idle in between; exits 0 once the last report is final. One JSON line per stall event on stdout.
    --loop picks the loop: StallWatch's EventLoop (default), Foundation's RunLoop.main, or dispatchMain() alone
    watched by a main-queue probe pinging every --probe-interval-ms (default 100).
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
    var loop = DemoLoop.stallwatch
    var probeIntervalMs = 100
    var configuration: StallWatchConfiguration

    init(arguments: [String]) {
        do {
            configuration = try StallWatchConfiguration.load()
        } catch {
            fail(error.message)
        }
        var args = arguments[...]
        func value(_ flag: String) -> String {
            guard let v = args.popFirst() else { fail("\(flag) needs a value\n\(usage)") }
            return v
        }
        func number(_ flag: String, _ range: ClosedRange<Int>) -> Int {
            let text = value(flag)
            guard let n = Int(text), range.contains(n) else {
                fail("\(flag) \(text): expected an integer from \(range.lowerBound) to \(range.upperBound)")
            }
            return n
        }
        while let arg = args.popFirst() {
            switch arg {
            case "--kind":
                let text = value(arg)
                guard let k = StallKind(rawValue: text) else {
                    fail("--kind \(text): expected one of \(StallKind.allCases.map(\.rawValue).joined(separator: ", "))")
                }
                kind = k
            case "--duration-ms": durationMs = number(arg, 1...3_600_000)
            case "--delay-ms": delayMs = number(arg, 0...3_600_000)
            case "--repeat": repeatCount = number(arg, 1...10_000)
            case "--loop":
                let text = value(arg)
                guard let l = DemoLoop(rawValue: text) else {
                    fail("--loop \(text): expected one of \(DemoLoop.allCases.map(\.rawValue).joined(separator: ", "))")
                }
                loop = l
            case "--probe-interval-ms": probeIntervalMs = number(arg, 1...60_000)
            case "--threshold-ms": configuration.thresholdMs = number(arg, 10...600_000)
            case "--report-dir": configuration.reportDirectory = value(arg)
            case "--strategy":
                let text = value(arg)
                guard ["deadline", "classic"].contains(text) else { fail("--strategy \(text): expected deadline or classic") }
                configuration.strategy = text
            case "-h", "--help":
                print(usage)
                exit(0)
            default: fail("unknown argument \(arg)\n\(usage)")
            }
        }
        if configuration.hangThresholdMs < configuration.thresholdMs {
            configuration.hangThresholdMs = configuration.thresholdMs
        }
    }

    func run() -> Never {
        if loop == .foundation { runOnFoundationRunLoop() }
        if loop == .dispatchMain { runOnDispatchMain() }
        let loop = EventLoop(name: "demo")
        let finished = EndedCounter()
        let kind = kind, durationMs = durationMs, repeatCount = repeatCount, delayMs = delayMs
        let watchdog = Watchdog(loop: loop, configuration: configuration) { event in
            EventPrinter.print(event)
            if case .ended = event, finished.increment() == repeatCount {
                loop.perform { loop.stop() }
            }
        }
        do {
            try watchdog.start()
        } catch {
            fail(error.message, code: 1)
        }
        // Stall, then idle for twice the threshold so the end is seen and the report finished, then stall again.
        let gap = Duration.milliseconds(max(delayMs, 2 * configuration.thresholdMs))
        for index in 0..<repeatCount {
            let at = Duration.milliseconds(delayMs) + (gap + .milliseconds(durationMs)) * index
            loop.schedule(after: at) { Stalls.run(kind, durationMs: durationMs) }
        }
        // A safety net: never hang the demo if a report does not come.
        let limit = Duration.milliseconds(delayMs) + (gap + .milliseconds(durationMs)) * repeatCount + .seconds(30)
        let result = loop.run(for: limit)
        watchdog.stop()
        if result == .timedOut {
            fail("timed out waiting for \(repeatCount) final report(s); \(finished.value) arrived", code: 1)
        }
        exit(0)
    }
}

final class EndedCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    func increment() -> Int {
        lock.lock()
        defer { lock.unlock() }
        count += 1
        return count
    }
    var value: Int {
        lock.lock()
        defer { lock.unlock() }
        return count
    }
}

var arguments = Array(CommandLine.arguments.dropFirst())
guard let command = arguments.first else { fail("missing command\n\(usage)") }
arguments.removeFirst()
switch command {
case "stall": StallCommand(arguments: arguments).run()
case "-h", "--help", "help": print(usage)
default: fail("unknown command \(command)\n\(usage)")
}
