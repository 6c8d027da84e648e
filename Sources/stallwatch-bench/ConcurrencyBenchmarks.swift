// Pool-side benchmarks: what timing every Concurrency job costs a Task.yield ping-pong and a 100k-task fan-out.
import Dispatch
import Foundation
import StallWatch

enum ConcurrencyBenchmarks {
    /// Runs `body` to completion from synchronous code (the benchmark's main thread is not on the pool).
    static func blocking(_ body: @escaping @Sendable () async -> Double) -> Double {
        let done = DispatchSemaphore(value: 0)
        let result = ResultBox()
        Task.detached {
            result.value = await body()
            done.signal()
        }
        done.wait()
        return result.value
    }

    final class ResultBox: @unchecked Sendable {  // Written by one task before the semaphore, read after.
        var value = 0.0
    }

    static func nanoseconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) * 1e9 + Double(duration.components.attoseconds) / 1e9
    }

    /// Nanoseconds per hop of two tasks that each `Task.yield()` `hops` times (every yield is one global enqueue).
    static func pingPong(hops: Int) -> Double {
        blocking {
            let start = ContinuousClock.now
            await withTaskGroup(of: Void.self) { group in
                for _ in 0..<2 {
                    group.addTask { for _ in 0..<hops { await Task.yield() } }
                }
            }
            return nanoseconds(ContinuousClock.now - start) / Double(2 * hops)
        }
    }

    /// Milliseconds to run `tasks` trivial child tasks in one task group.
    static func fanOut(tasks: Int) -> Double {
        blocking {
            let start = ContinuousClock.now
            await withTaskGroup(of: Int.self) { group in
                for i in 0..<tasks { group.addTask { i & 1 } }
                var sum = 0
                for await value in group { sum &+= value }
                precondition(sum >= 0)
            }
            return nanoseconds(ContinuousClock.now - start) / 1e6
        }
    }

    /// How the pool is watched in one round.
    enum Mode: CaseIterable {
        case off, timedLeadUpOff, timed, timedWithTable
    }

    /// Both workloads without job timing, with it and the workers' lead-up off, with it (lead-up on, the default; no
    /// task table), and with it and the task table, interleaved round by round (best of 5 each), in one run: the
    /// lead-up's cost is the third against the second, the table's the fourth against the third.
    static func jobTimingCost() {
        var configuration = StallWatchConfiguration()
        configuration.reportDirectory = NSTemporaryDirectory() + "stallwatch-bench-pool"
        configuration.heartbeat = false
        let hops = 100_000
        let fan = 100_000
        var best: [Mode: (hop: Double, fan: Double)] = [:]
        for mode in Mode.allCases { best[mode] = (.infinity, .infinity) }
        _ = pingPong(hops: 10_000)  // warm the pool's threads
        for _ in 0..<5 {
            for mode in Mode.allCases {
                if mode != .off {
                    configuration.maxTasks = mode == .timedWithTable ? 65_536 : 0
                    configuration.leadUp = mode != .timedLeadUpOff
                    do { try ConcurrencyWatchdog.enable(configuration: configuration) } catch {
                        Table.row(["pool job timing", "unavailable: \(error.message)", ""])
                        return
                    }
                }
                let hop = pingPong(hops: hops)
                let fanMs = fanOut(tasks: fan)
                if mode != .off { ConcurrencyWatchdog.disable() }
                let previous = best[mode]!
                best[mode] = (min(previous.hop, hop), min(previous.fan, fanMs))
            }
        }
        let off = best[.off]!, on = best[.timed]!, table = best[.timedWithTable]!, bare = best[.timedLeadUpOff]!
        Table.row([
            "Task.yield ping-pong, 2 tasks × 100k hops (best of 5)",
            String(
                format: "%.0f ns/hop off, %.0f ns/hop timed (%+.1f%%)", off.hop, on.hop, (on.hop / off.hop - 1) * 100),
            "bar ≤ +5%",
        ])
        Table.row([
            "fan-out of 100k trivial child tasks (best of 5)",
            String(format: "%.1f ms off, %.1f ms timed (%+.1f%%)", off.fan, on.fan, (on.fan / off.fan - 1) * 100),
            "bar ≤ +5%",
        ])
        Table.row([
            "the workers' lead-up on top of job timing: ping-pong / fan-out (best of 5)",
            String(
                format: "%.0f ns/hop (%+.1f%%) / %.1f ms (%+.1f%%)", on.hop, (on.hop / bare.hop - 1) * 100, on.fan,
                (on.fan / bare.fan - 1) * 100),
            "bar: lead-up ≤ +1%",
        ])
        Table.row([
            "task table on top of job timing: ping-pong / fan-out (best of 5)",
            String(
                format: "%.0f ns/hop (%+.1f%%) / %.1f ms (%+.1f%%)", table.hop, (table.hop / on.hop - 1) * 100,
                table.fan, (table.fan / on.fan - 1) * 100),
            "bar ≤ +2%",
        ])
    }
}
