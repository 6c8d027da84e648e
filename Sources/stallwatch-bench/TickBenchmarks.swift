// The tick API's cost: a hand-written loop calling willWait()/willRunWork() next to the same loop unwatched.
import CStallWatchCore
import Foundation
import StallWatch

enum TickBenchmarks {
    /// A loop of `iterations` tiny work items (a few dozen ns of hashing each), as a service's own loop would run
    /// them, measured in loop-thread CPU: without ticks (the anchor), with the two tick calls per item and no
    /// watchdog (the calls alone), and with a watchdog running (which parks whenever it sees the loop idle, so a
    /// loop that "waits" between every item also pays the semaphore signal of the idle → busy edge each time
    /// the watchdog parked) — with its lead-up off (the tick calls' bar) and on (each turn then is a lead-up item:
    /// two precise clock reads more, the recorder's cost, no bar of its own here: see the lead-up rows). Best of 5
    /// each, one run.
    static func tickCost() {
        let iterations = 5_000_000
        var anchor = Double.nan
        for mode in ["unwatched", "ticks, no watchdog", "ticks, watchdog on", "ticks, watchdog and lead-up on"] {
            let ticks = TickedLoop(name: "bench-ticks")
            var config = StallWatchConfiguration()
            config.reportDirectory = NSTemporaryDirectory() + "stallwatch-bench-reports"
            config.heartbeat = false
            config.leadUp = mode == "ticks, watchdog and lead-up on"
            config.leadUpStacks = .off
            let watchdog = Watchdog(loop: ticks, configuration: config)
            if mode.contains("watchdog") && !mode.contains("no watchdog") { try! watchdog.start() }
            let ticking = mode != "unwatched"
            var best = Double.infinity
            var hash: UInt64 = 0xcbf2_9ce4_8422_2325
            for _ in 0..<5 {
                let cpu0 = LoopBenchmarks.threadCPUNanos()
                for i in 0..<iterations {
                    if ticking { ticks.willWait() }
                    if ticking { ticks.willRunWork() }
                    hash = workItem(hash, UInt64(i))
                }
                best = min(best, Double(LoopBenchmarks.threadCPUNanos() - cpu0) / Double(iterations))
            }
            if ticking { ticks.finish() }
            watchdog.stop()
            blackHole(hash)
            if mode == "unwatched" { anchor = best }
            Table.row([
                "tick loop, 5M items, \(mode) (best of 5)", String(format: "%.1f ns/item", best),
                mode == "unwatched"
                    ? "the unwatched anchor"
                    : String(
                        format: "%.3f× unwatched; %+.2f ns per transition (2 per item)", best / anchor,
                        (best - anchor) / 2)
                        + (mode.contains("lead-up") ? "; the turn timed as a lead-up item" : "; bar ≤ 10 ns"),
            ])
        }
    }

    /// The two calls alone, back to back with nothing between them: their whole cost, none of it hidden behind
    /// the latency of a work item (out-of-order execution overlaps the stores and the clock read with work).
    static func tickPairCost() {
        let ticks = TickedLoop(name: "bench-ticks")
        let iterations = 20_000_000
        var best = Double.infinity
        for _ in 0..<5 {
            let start = sw_monotonic_ns()
            for _ in 0..<iterations {
                ticks.willWait()
                ticks.willRunWork()
            }
            best = min(best, Double(sw_monotonic_ns() - start) / Double(iterations))
        }
        ticks.finish()
        Table.row([
            "tick pair alone, willWait() + willRunWork() (best of 5, 20M)", String(format: "%.2f ns", best),
            String(format: "%.2f ns per transition; bar ≤ 10 ns", best / 2),
        ])
    }

    @inline(never)
    static func workItem(_ seed: UInt64, _ value: UInt64) -> UInt64 {
        var hash = seed
        for k in 0..<16 { hash = (hash ^ (value &+ UInt64(k))) &* 0x100_0000_01b3 }
        return hash
    }

    @inline(never)
    static func blackHole(_ value: UInt64) {
        if value == 42 { print("") }
    }
}
