// The `stall` command on loops the service already runs: a Foundation RunLoop, or dispatchMain() alone.
import CoreFoundation
import Foundation
import StallWatch

/// The loop `stallwatch-demo stall --loop` runs the stalls on.
enum DemoLoop: String, CaseIterable {
    /// StallWatch's own EventLoop on the main thread.
    case stallwatch
    /// `RunLoop.main`, watched through CFRunLoopObservers.
    case foundation
    /// `dispatchMain()` only, watched by a main-queue ping probe.
    case dispatchMain = "dispatch-main"
    /// The Swift Concurrency pool, watched by the ConcurrencyWatchdog (`--kind cpu|sleep|lock|io|saturate`).
    case concurrency
    /// An epoll server on `--threads` event-loop threads of its own, watched by a ThreadWatchdog by name.
    case threads
}

/// Lets the event handler reach the watchdog it was given to.
final class WatchdogHolder: @unchecked Sendable {
    // @unchecked Sendable: set once before Watchdog.start(), read on the thread that start() creates.
    var watchdog: Watchdog?
}

extension StallCommand {
    /// When each stall starts, after the loop began running: idle twice the threshold in between, so the end is
    /// seen and the report finished before the next one.
    var stallOffsets: [Duration] {
        let gap = Duration.milliseconds(max(delayMs, 2 * configuration.thresholdMs))
        return (0..<repeatCount).map { .milliseconds(delayMs) + (gap + .milliseconds(durationMs)) * $0 }
    }

    /// A safety net: never hang the demo if a report does not come.
    var timeLimit: Duration { (stallOffsets.last ?? .zero) + .milliseconds(durationMs) * 2 + .seconds(30) }

    func makeWatchdog(loop: any WatchedLoop, onFinished: @escaping @Sendable () -> Void) -> Watchdog {
        let repeatCount = repeatCount
        let watchdog = Watchdog(loop: loop, configuration: configuration) { event in
            EventPrinter.print(event)
            guard case .ended(let report) = event, InjectedStalls.shared.cover(report) == repeatCount else { return }
            Stalls.printRunQueueWaitSinceLastStall()
            onFinished()
        }
        do {
            try watchdog.start()
        } catch {
            fail(error.message, code: 1)
        }
        return watchdog
    }

    /// Stalls in Foundation `Timer`s on `RunLoop.main`, run by `RunLoop.main.run(mode:before:)`.
    func runOnFoundationRunLoop() -> Never {
        let monitor = FoundationRunLoopMonitor(runLoop: .main, name: "demo")
        monitor.start()
        let done = EndedCounter()
        let watchdog = makeWatchdog(loop: monitor) {
            DispatchQueue.main.async {  // the main queue is drained by the main RunLoop
                _ = done.increment()
                CFRunLoopStop(CFRunLoopGetMain())
            }
        }
        let kind = kind, durationMs = durationMs
        let start = Date()
        for offset in stallOffsets {
            let timer = Timer(fire: start + offset.timeInterval, interval: 0, repeats: false) { _ in
                Stalls.run(kind, durationMs: durationMs)
            }
            RunLoop.main.add(timer, forMode: .default)
        }
        let deadline = start + timeLimit.timeInterval
        // Keeps the run loop from finding itself without sources (run(mode:before:) would return at once).
        RunLoop.main.add(Timer(fire: deadline, interval: 0, repeats: false) { _ in }, forMode: .default)
        while done.value == 0, Date() < deadline {
            _ = RunLoop.main.run(mode: .default, before: deadline)
        }
        watchdog.stop()
        monitor.stop()
        if done.value == 0 { fail("timed out waiting for \(repeatCount) final report(s)", code: 1) }
        exit(0)
    }

    /// Stalls in blocks on the main queue, run by `dispatchMain()`, watched by a main-queue probe.
    func runOnDispatchMain() -> Never {
        let probe = MainQueueProbe(name: "demo", interval: .milliseconds(probeIntervalMs))
        let holder = WatchdogHolder()
        holder.watchdog = makeWatchdog(loop: probe) {
            DispatchQueue.main.async {
                holder.watchdog?.stop()
                probe.stop()
                exit(0)
            }
        }
        let kind = kind, durationMs = durationMs, repeatCount = repeatCount
        for offset in stallOffsets {
            DispatchQueue.main.asyncAfter(deadline: .now() + offset.timeInterval) {
                Stalls.run(kind, durationMs: durationMs)
            }
        }
        DispatchQueue.main.asyncAfter(deadline: .now() + timeLimit.timeInterval) {
            fail("timed out waiting for \(repeatCount) final report(s)", code: 1)
        }
        // Started last, on the main thread, right before the loop runs: what the main thread does between the
        // probe's start and `dispatchMain()` is a busy phase of the main queue like any other.
        probe.start()
        dispatchMain()
    }
}

extension Duration {
    /// Seconds, for Foundation and Dispatch APIs.
    var timeInterval: TimeInterval {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
