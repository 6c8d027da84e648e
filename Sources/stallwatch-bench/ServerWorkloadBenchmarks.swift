// The task table's cost on a server-shaped Concurrency workload: requests as child tasks, actor hops, continuations.
import CStallWatchConcurrency
import Dispatch
import Foundation
import StallWatch
import Synchronization

/// A service's shared state behind an actor, as request handlers reach it (a session cache, a counter).
actor SessionStore {
    private var sessions: [Int: UInt64] = [:]
    private var served = 0

    func touch(_ key: Int, _ value: UInt64) -> UInt64 {
        let previous = sessions[key] ?? 0
        sessions[key] = previous &+ value
        return previous
    }

    func record(_ value: UInt64) {
        served += 1
        if value == 0 { sessions.removeAll() }  // never true in practice: keeps the call from being optimised out
    }
}

enum ServerWorkloadBenchmarks {
    /// Requests in flight at once (connections of a busy service).
    static let inFlight = 128

    /// A little CPU per step, as parsing or encoding a small message would take (FNV-1a over 256 bytes).
    @inline(never)
    static func work(_ seed: UInt64) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325 ^ seed
        for byte in 0..<256 { hash = (hash ^ UInt64(byte & 0xff)) &* 0x100_0000_01b3 }
        return hash
    }

    /// One request: a read completed by an I/O queue (a continuation), a hop to the shared actor, two `async let`
    /// children doing the work, one more hop to record it.
    static func handle(_ request: Int, store: SessionStore, io: DispatchQueue) async -> UInt64 {
        let body: UInt64 = await withCheckedContinuation { continuation in
            io.async { continuation.resume(returning: work(UInt64(request))) }
        }
        let session = await store.touch(request & 1023, body)
        async let left = work(body)
        async let right = work(body &+ session)
        let result = await left ^ right
        await store.record(result | 1)
        return result
    }

    /// Milliseconds, by the workload's own clock, to serve `requests` requests with `inFlight` of them in flight,
    /// each its own child task of one task group, and the process's CPU time meanwhile (every thread: workers, I/O
    /// queue, the pool watchdog draining the table), in milliseconds.
    static func serve(requests: Int) -> (wall: Double, cpu: Double) {
        let cpu0 = LoopBenchmarks.processCPUNanos()
        let wall = ConcurrencyBenchmarks.blocking {
            let store = SessionStore()
            let io = DispatchQueue(label: "bench-io")
            let start = ContinuousClock.now
            await withTaskGroup(of: UInt64.self) { group in
                var next = 0
                while next < min(inFlight, requests) {
                    let request = next
                    group.addTask { await handle(request, store: store, io: io) }
                    next += 1
                }
                var sum: UInt64 = 0
                for await value in group {
                    sum ^= value
                    if next < requests {
                        let request = next
                        group.addTask { await handle(request, store: store, io: io) }
                        next += 1
                    }
                }
                precondition(sum != 1)
            }
            return ConcurrencyBenchmarks.nanoseconds(ContinuousClock.now - start) / 1e6
        }
        return (wall, Double(LoopBenchmarks.processCPUNanos() - cpu0) / 1e6)
    }

    /// CPU time of the thread named `stallwatch-pool` (0 when there is none), from its schedstat.
    static func poolWatchdogCPUNanos() -> UInt64 {
        for tid in (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? [] {
            let comm = (try? String(contentsOfFile: "/proc/self/task/\(tid)/comm", encoding: .utf8)) ?? ""
            guard comm.hasPrefix("stallwatch-pool") else { continue }
            let stat = (try? String(contentsOfFile: "/proc/self/task/\(tid)/schedstat", encoding: .utf8)) ?? ""
            return UInt64(stat.split(separator: " ").first ?? "") ?? 0
        }
        return 0
    }

    /// How the pool is watched in one round.
    enum Mode: String, CaseIterable {
        case off = "unwatched"
        case hook = "job hook, no table"
        case table = "job hook and task table"
    }

    /// The same fixed amount of requests served unwatched, with the job hook alone and with the hook and the task
    /// table (`maxTasks` 65,536, hung-await detection at its default), the modes alternated round by round (their
    /// order rotating), several rounds: median and spread of each, and the overhead as the median of the rounds'
    /// paired ratios, in wall time and in process CPU time (which other processes' load disturbs less).
    static func tableCost(rounds: Int = 21, requests: Int = 20_000) {
        var configuration = StallWatchConfiguration()
        configuration.reportDirectory = NSTemporaryDirectory() + "stallwatch-bench-server"
        configuration.heartbeat = false
        configuration.maxTasks = 65_536
        var times: [Mode: [Double]] = [:]
        var cpus: [Mode: [Double]] = [:]
        var watchdogCPU: [Mode: [Double]] = [:]
        var eventsDropped: UInt64 = 0
        var tasksDropped: UInt64 = 0
        var eventsApplied: UInt64 = 0
        _ = serve(requests: requests / 4)  // warm the pool's threads and the allocator
        let modes = Mode.allCases
        for round in 0..<rounds {
            for step in 0..<modes.count {
                let mode = modes[(round + step) % modes.count]
                if mode != .off {
                    var settings = configuration
                    settings.maxTasks = mode == .table ? configuration.maxTasks : 0
                    do { try ConcurrencyWatchdog.enable(configuration: settings) } catch {
                        Table.row(["server workload", "unavailable: \(error.message)", ""])
                        return
                    }
                }
                let watchdog0 = poolWatchdogCPUNanos()
                let served = serve(requests: requests)
                watchdogCPU[mode, default: []].append(Double(poolWatchdogCPUNanos() - watchdog0) / 1e6)
                times[mode, default: []].append(served.wall)
                cpus[mode, default: []].append(served.cpu)
                if mode == .table, let header = sw_tasks_header_pointer()?.pointee {
                    eventsDropped += header.events_dropped
                    tasksDropped += header.tasks_dropped
                    eventsApplied += header.events_applied
                }
                if mode != .off { ConcurrencyWatchdog.disable() }
            }
        }
        let perRequest = { (ms: Double) in ms * 1e3 / Double(requests) }
        for mode in modes {
            let wall = times[mode]!.sorted()
            let cpu = cpus[mode]!.sorted()
            Table.row([
                "server workload, \(requests / 1000)k requests, \(inFlight) in flight: \(mode.rawValue) "
                    + "(\(rounds) rounds)",
                String(
                    format: "wall median %.1f ms (%.2f µs/request), CPU median %.1f ms (%.2f µs/request)",
                    pct(wall, 50), perRequest(pct(wall, 50)), pct(cpu, 50), perRequest(pct(cpu, 50))),
                String(
                    format: "wall min %.1f, max %.1f ms; CPU min %.1f, max %.1f ms", wall.first!, wall.last!,
                    cpu.first!, cpu.last!),
            ])
        }
        for mode in [Mode.hook, .table] {
            let ms = pct(watchdogCPU[mode]!.sorted(), 50)
            Table.row([
                "of which the pool watchdog thread (\(mode.rawValue)), median",
                String(format: "%.1f ms (%.2f µs/request)", ms, perRequest(ms)),
                mode == .table
                    ? String(
                        format: "draining the workers' job ends into the rows, %.1f a request; over all rounds ",
                        Double(eventsApplied) / Double(rounds * requests))
                        + "\(eventsDropped) job ends lost from full rings, \(tasksDropped) tasks not tabled (table full)"
                    : "",
            ])
        }
        func overhead(_ mode: Mode, over anchor: Mode, in figures: [Mode: [Double]]) -> String {
            let ratios = zip(figures[mode]!, figures[anchor]!).map { ($0 / $1 - 1) * 100 }.sorted()
            return String(
                format: "%+.1f%% (p25 %+.1f%%, p75 %+.1f%%)", pct(ratios, 50), pct(ratios, 25), pct(ratios, 75))
        }
        let comparisons: [(String, Mode, Mode, String)] = [
            ("job hook, no table, vs unwatched", .hook, .off, ""),
            ("task table on top of the job hook", .table, .hook, "bar ≤ +2%"),
            ("job hook and task table vs unwatched", .table, .off, ""),
        ]
        for (label, mode, anchor, bar) in comparisons {
            Table.row([
                label + ", rounds' paired ratios",
                "wall " + overhead(mode, over: anchor, in: times) + ", CPU " + overhead(mode, over: anchor, in: cpus),
                bar,
            ])
        }
    }
}
