// Loop-side benchmarks: cost per transition, loop throughput with the watchdog off/on, detection latency.
import CStallWatchCore
import Dispatch
import Foundation
import StallWatch
import Synchronization

/// A loop for one benchmark; a benchmark run that cannot create one (out of descriptors) ends with the reason.
func benchmarkLoop(_ name: String) -> EventLoop {
    do {
        return try EventLoop(name: name, mainQueue: .disabled)
    } catch {
        FileHandle.standardError.write(Data("stallwatch-bench: \(error.message)\n".utf8))
        exit(1)
    }
}

enum LoopBenchmarks {
    /// Nanoseconds per published transition (the loop's whole cost of being watched).
    ///
    /// An iteration that ran work is beforeTimers (clock read: work ran since) → beforeSources (no timer fired:
    /// same instant, no clock) → beforeWaiting (idle: no clock) → afterWaiting (slept: clock read). The worst
    /// case reads the clock on every transition (observers or timers firing in every phase).
    static func transitionCost() {
        let state = LoopState()
        let iterations: UInt64 = 20_000_000
        let phases: [LoopActivity] = [.beforeTimers, .beforeSources, .beforeWaiting, .afterWaiting]
        let clock: [Bool] = [true, false, false, true]
        for (label, worst) in [("iteration with work", false), ("worst case, clock every transition", true)] {
            var best = Double.infinity
            for _ in 0..<5 {
                let start = sw_monotonic_ns()
                for i in 0..<iterations {
                    let k = Int(i & 3)
                    state.benchmarkRecord(phases[k], sequence: i, timeMoved: worst || clock[k])
                }
                best = min(best, Double(sw_monotonic_ns() - start) / Double(iterations))
            }
            Table.row([
                "per-transition publish, \(label) (best of 5, 20M)", String(format: "%.2f ns", best), "bar ≤ 10 ns",
            ])
        }
        // The lead-up's cost per item on top of the publishes: begin and end of an item in the open bucket (the
        // common case), the clock reads being the loop's own.
        if let ring = LoopState().startLeadUp(StallWatchConfiguration().leadUpSettings) {
            var best = Double.infinity
            for _ in 0..<5 {
                let base = sw_monotonic_ns()
                let start = sw_monotonic_ns()
                for i in 0..<iterations {
                    // 10 items per µs of fake time: most end in the open bucket, one in 100,000 crosses a bucket.
                    let now = base &+ i / 10
                    sw_leadup_begin(ring.pointer, now, 1)
                    sw_leadup_end(ring.pointer, now, now &+ 50, 1, 0)
                }
                best = min(best, Double(sw_monotonic_ns() - start) / Double(iterations))
            }
            Table.row([
                "lead-up item begin + end, open bucket (best of 5, 20M)", String(format: "%.2f ns", best),
                "per item, beside the publishes above",
            ])
        }
        var ts = timespec()
        let start = sw_monotonic_ns()
        for _ in 0..<iterations { clock_gettime(CLOCK_MONOTONIC_COARSE, &ts) }
        let coarse = Double(sw_monotonic_ns() - start) / Double(iterations)
        Table.row([
            "CLOCK_MONOTONIC_COARSE read (the floor of a timestamped transition)", String(format: "%.2f ns", coarse),
            "",
        ])
    }

    /// A loop running a chain of tiny work items (each item performs the next): items/s and loop CPU, and the
    /// watched loop's CPU per item against the unwatched loop's (the anchor, measured in the same run).
    static func throughput() {
        var unwatchedNanosPerItem = Double.nan
        var leadUpOffNanosPerItem = Double.nan
        var stacksOffNanosPerItem = Double.nan
        for mode in ["off", "deadline, lead-up off", "deadline, lead-up stacks off", "deadline", "classic"] {
            let loop = benchmarkLoop("bench")
            var config = StallWatchConfiguration()
            config.reportDirectory = NSTemporaryDirectory() + "stallwatch-bench-reports"
            config.strategy = mode == "classic" ? .classic : .deadline
            config.leadUp = mode != "deadline, lead-up off"
            config.leadUpStacks = mode == "deadline, lead-up stacks off" ? .off : .auto
            let watchdog = Watchdog(loop: loop, configuration: config)
            if mode != "off" { try! watchdog.start() }
            let total = 2_000_000
            let done = Atomic<Int>(0)
            @Sendable func step() {
                if done.add(1, ordering: .relaxed).newValue < total { loop.perform(step) } else { loop.stop() }
            }
            loop.perform(step)
            let wall0 = sw_monotonic_ns()
            let cpu0 = threadCPUNanos()
            loop.run()
            let cpu = threadCPUNanos() - cpu0
            let wall = sw_monotonic_ns() - wall0
            watchdog.stop()
            let perItem = Double(cpu) / Double(total)
            if mode == "off" { unwatchedNanosPerItem = perItem }
            if mode == "deadline, lead-up off" { leadUpOffNanosPerItem = perItem }
            if mode == "deadline, lead-up stacks off" { stacksOffNanosPerItem = perItem }
            let leadUpCost =
                mode == "deadline"
                ? String(
                    format: "; lead-up +%.1f ns per item vs lead-up off, its stacks (kernel ring) %+.1f ns",
                    perItem - leadUpOffNanosPerItem, perItem - stacksOffNanosPerItem) : ""
            Table.row([
                "loop, 2M chained items, watchdog \(mode)",
                String(format: "%.0f k items/s", Double(total) / (Double(wall) / 1e9) / 1000),
                String(format: "loop CPU %.1f ns/item", perItem)
                    + (mode == "off"
                        ? " (the unwatched anchor)"
                        : String(
                            format: "; %.3f× unwatched, +%.1f ns per item", perItem / unwatchedNanosPerItem,
                            perItem - unwatchedNanosPerItem)) + leadUpCost,
            ])
        }
    }

    /// The bar as DESIGN states it: a loop running short work items at a fixed rate (100k per second; 10k, the
    /// lead-up's own bar), process CPU with the watchdog off and on (both strategies, and the deadline one without
    /// the lead-up: the lead-up's own cost). Items arrive in bursts every 10 ms from a producer thread.
    static func fixedRateCPU(itemsPerSecond: Int = 100_000, seconds: Int = 3) {
        let burst = max(1, itemsPerSecond / 100)
        let rate = itemsPerSecond >= 1000 ? "\(itemsPerSecond / 1000)k" : "\(itemsPerSecond)"
        var baseline: Double = 0
        var leadUpOff: Double = 0
        var stacksOff: Double = 0
        for mode in ["off", "deadline, lead-up off", "deadline, lead-up stacks off", "deadline", "classic"] {
            let loop = benchmarkLoop("rate")
            var config = StallWatchConfiguration()
            config.reportDirectory = NSTemporaryDirectory() + "stallwatch-bench-reports"
            config.strategy = mode == "classic" ? .classic : .deadline
            config.heartbeat = false
            config.leadUp = mode != "deadline, lead-up off"
            config.leadUpStacks = mode == "deadline, lead-up stacks off" ? .off : .auto
            let watchdog = Watchdog(loop: loop, configuration: config)
            if mode != "off" { try! watchdog.start() }
            let thread = Thread { loop.run() }
            thread.start()
            let executed = Atomic<Int>(0)
            let cpu0 = processCPUNanos()
            let start = sw_monotonic_ns()
            for tick in 0..<(seconds * 100) {
                for _ in 0..<burst { loop.perform { executed.add(1, ordering: .relaxed) } }
                let next = start + UInt64(tick + 1) * 10_000_000
                let now = sw_monotonic_ns()
                if next > now { usleep(UInt32((next - now) / 1000)) }
            }
            let cpu = Double(processCPUNanos() - cpu0) / Double(sw_monotonic_ns() - start) * 100
            loop.stop()
            watchdog.stop()
            if mode == "off" { baseline = cpu }
            if mode == "deadline, lead-up off" { leadUpOff = cpu }
            if mode == "deadline, lead-up stacks off" { stacksOff = cpu }
            var delta = mode == "off" ? "" : String(format: "%+.2f points vs off", cpu - baseline)
            if mode == "deadline" {
                delta += String(
                    format: ", %+.2f vs lead-up off (bar: lead-up ≤ +1 point), stacks %+.2f", cpu - leadUpOff,
                    cpu - stacksOff)
            }
            Table.row([
                "\(rate) items/s for \(seconds) s, watchdog \(mode)", String(format: "process CPU %.2f%%", cpu),
                delta + (mode == "off" ? "bar: on ≤ off + 1 point" : ""),
            ])
        }
    }

    /// Resident memory per watched loop: eight loops, each running 10k items/s for 2 s (the lead-up's rings and the
    /// kernel's stack ring written to), with no watchdog, a watchdog without the lead-up, and one with it; the
    /// process's `VmRSS` growth over the eight, divided by eight.
    static func residentPerLoop(loops count: Int = 8, seconds: Int = 2) {
        var rows: [(String, Double)] = []
        for mode in ["off", "deadline, lead-up off", "deadline"] {
            let before = residentKiB()
            var watched: [(EventLoop, Watchdog)] = []
            for index in 0..<count {
                let loop = benchmarkLoop("rss-\(index)")
                var config = StallWatchConfiguration()
                config.reportDirectory = NSTemporaryDirectory() + "stallwatch-bench-reports"
                config.heartbeat = false
                config.leadUp = mode == "deadline"
                let watchdog = Watchdog(loop: loop, configuration: config)
                if mode != "off" { try! watchdog.start() }
                Thread { loop.run() }.start()
                watched.append((loop, watchdog))
            }
            let start = sw_monotonic_ns()
            for tick in 0..<(seconds * 100) {
                for (loop, _) in watched {
                    for _ in 0..<100 { loop.perform { busyWait(microseconds: 5) } }
                }
                let next = start + UInt64(tick + 1) * 10_000_000
                let now = sw_monotonic_ns()
                if next > now { usleep(UInt32((next - now) / 1000)) }
            }
            let perLoop = Double(residentKiB() - before) / Double(count) / 1024
            for (loop, watchdog) in watched {
                loop.stop()
                watchdog.stop()
            }
            rows.append((mode, perLoop))
        }
        let off = rows.first?.1 ?? 0
        for (mode, perLoop) in rows {
            Table.row([
                "RSS per loop, \(count) loops at 10k items/s, watchdog \(mode)", String(format: "%.2f MiB", perLoop),
                mode == "off"
                    ? "bar: lead-up ≤ +1 MiB per loop"
                    : String(format: "%+.2f MiB per loop vs off", perLoop - off),
            ])
        }
    }

    /// The process's resident set (`VmRSS`), KiB.
    static func residentKiB() -> Int {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") })
        else { return 0 }
        return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? 0
    }

    static func busyWait(microseconds: Int) {
        let end = threadCPUNanos() + UInt64(microseconds) * 1000
        while threadCPUNanos() < end {}
    }

    static func processCPUNanos() -> UInt64 {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        let user = UInt64(usage.ru_utime.tv_sec) * 1_000_000_000 + UInt64(usage.ru_utime.tv_usec) * 1000
        let system = UInt64(usage.ru_stime.tv_sec) * 1_000_000_000 + UInt64(usage.ru_stime.tv_usec) * 1000
        return user + system
    }

    /// Stalls of 3× the threshold, repeated: detection latency (threshold crossed → watchdog saw it) and time
    /// from detection to the provisional report on disk.
    static func detectionLatency(stalls: Int = 40) {
        let loop = benchmarkLoop("latency")
        var config = StallWatchConfiguration()
        config.thresholdMs = 50
        config.sampleIntervalMs = 20
        config.reportDirectory = NSTemporaryDirectory() + "stallwatch-bench-latency"
        config.maxReports = 1000
        let latencies = Mutex<[Double]>([])
        let toDisk = Mutex<[Double]>([])
        let ended = DispatchSemaphore(value: 0)
        let watchdog = Watchdog(loop: loop, configuration: config) { event in
            switch event {
            case .began(let report):
                latencies.withLock { $0.append(report.detection.latencyMs) }
                toDisk.withLock { $0.append(Date().timeIntervalSince(report.detection.detectedAt) * 1000) }
            case .ended: ended.signal()
            default: break
            }
        }
        try! watchdog.start()
        let thread = Thread { loop.run() }
        thread.start()
        for _ in 0..<stalls {
            loop.perform { busyWait(milliseconds: 150) }
            ended.wait()
            usleep(20_000)
        }
        loop.stop()
        watchdog.stop()
        try? FileManager.default.removeItem(atPath: config.reportDirectory)
        let l = latencies.withLock { $0 }.sorted()
        let d = toDisk.withLock { $0 }.sorted()
        Table.row([
            "detection latency (\(l.count) stalls)", "p50 \(fmt(pct(l, 50))) ms",
            "p99 \(fmt(pct(l, 99))) ms (bar ≤ 5 ms)",
        ])
        Table.row([
            "detection → provisional report on disk", "p50 \(fmt(pct(d, 50))) ms",
            "p99 \(fmt(pct(d, 99))) ms (bar ≤ 50 ms)",
        ])
    }

    /// The watchdog thread's wake-ups while the loop idles for 2 s (bar: none).
    static func idleWakeups() {
        let loop = benchmarkLoop("idle")
        var config = StallWatchConfiguration()
        config.reportDirectory = NSTemporaryDirectory() + "stallwatch-bench-idle"
        let watchdog = Watchdog(loop: loop, configuration: config)
        try! watchdog.start()
        let thread = Thread { loop.run() }
        thread.start()
        usleep(200_000)
        let before = watchdogSwitches()
        usleep(2_000_000)
        let after = watchdogSwitches()
        loop.stop()
        watchdog.stop()
        Table.row(["watchdog wake-ups, loop idle 2 s", "\(after - before)", "bar: 0"])
    }

    @inline(never)
    static func busyWait(milliseconds: Int) {
        let end = sw_monotonic_ns() + UInt64(milliseconds) * 1_000_000
        while sw_monotonic_ns() < end {}
    }

    static func threadCPUNanos() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    /// Voluntary + involuntary context switches of the thread named stallwatch-watchdog.
    static func watchdogSwitches() -> Int {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        for tid in tasks {
            let comm = (try? String(contentsOfFile: "/proc/self/task/\(tid)/comm", encoding: .utf8)) ?? ""
            guard comm.hasPrefix("stallwatch-watc") else { continue }
            let status = (try? String(contentsOfFile: "/proc/self/task/\(tid)/status", encoding: .utf8)) ?? ""
            return status.split(separator: "\n").filter { $0.contains("ctxt_switches") }
                .compactMap { Int($0.split(separator: "\t").last ?? "") }.reduce(0, +)
        }
        return -1
    }
}

func pct(_ sorted: [Double], _ p: Double) -> Double {
    guard !sorted.isEmpty else { return .nan }
    return sorted[min(sorted.count - 1, Int(Double(sorted.count - 1) * p / 100.0 + 0.5))]
}

func fmt(_ v: Double) -> String { String(format: "%.2f", v) }

/// One row of a timing table: count, median and p99 of nanosecond `values`, in µs or ms.
func row(_ what: String, _ values: [UInt64], _ notes: String = "") {
    let sorted = values.sorted()
    func at(_ p: Double) -> String {
        guard !sorted.isEmpty else { return "–" }
        let ns = Double(sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))])
        return ns >= 1e6 ? String(format: "%.2f ms", ns / 1e6) : String(format: "%.1f µs", ns / 1e3)
    }
    print("| \(what) | \(sorted.count) | \(at(0.5)) | \(at(0.99)) | \(notes) |")
}

enum Table {
    static func header(_ title: String) {
        print("\n## \(title)\n")
        print("| measurement | value | notes |")
        print("|---|---|---|")
    }

    static func row(_ cells: [String]) {
        print("| " + cells.joined(separator: " | ") + " |")
    }
}
