// The sidecar's pause as the target sees it: a clock-spinning target logs every gap; stallwatch (a sample, and
// `stallwatch dump`) vs eu-stack vs gdb.
import CStallWatchCore
import Foundation
import StallWatch
import StallWatchSidecar
import Synchronization

/// The target (`stallwatch-bench clock-spinner`): 60 frames deep, its main thread reads CLOCK_MONOTONIC in a loop
/// and logs every gap longer than 5 µs as `GAP start end` (a helper thread prints them, so printing never sits
/// between two reads of the spinning thread).
final class ClockSpinner: Sendable {
    static let thresholdNs: UInt64 = 5000
    static let capacity = 1 << 16
    nonisolated(unsafe) let starts = UnsafeMutablePointer<UInt64>.allocate(capacity: capacity)
    nonisolated(unsafe) let ends = UnsafeMutablePointer<UInt64>.allocate(capacity: capacity)
    let count = Atomic<Int>(0)

    static func run() -> Never {
        let spinner = ClockSpinner()
        Thread {
            var printed = 0
            while true {
                usleep(2000)
                let count = spinner.count.load(ordering: .acquiring)
                while printed < count {
                    let slot = printed % capacity
                    print("GAP \(spinner.starts[slot]) \(spinner.ends[slot])")
                    printed += 1
                }
                fflush(nil)
            }
        }.start()
        print("READY")
        fflush(nil)
        spinner.descend(60)
    }

    @inline(never)
    func descend(_ depth: Int) -> Never {
        if depth > 0 { descend(depth - 1) } else { spin() }
    }

    @inline(never)
    func spin() -> Never {
        var last = sw_monotonic_ns()
        var logged = 0
        while true {
            let now = sw_monotonic_ns()
            if now &- last > Self.thresholdNs {
                starts[logged % Self.capacity] = last
                ends[logged % Self.capacity] = now
                logged += 1
                count.store(logged, ordering: .releasing)
            }
            last = now
        }
    }
}

/// Three rounds on one clock-spinning target: stallwatch's sidecar sample (capture + unwind), `stallwatch dump -p`
/// (the whole command, every thread), `eu-stack -1 -p` and `gdb -batch`; each tool's pause is the longest gap
/// the target logged that began during the tool's call.
func runTargetPauseBenchmarks() {
    Table.header("Sidecar pause as the target sees it (clock-spinning thread, 60 frames deep)")
    let target = Process()
    target.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
    target.arguments = ["clock-spinner"]
    let output = Pipe()
    target.standardOutput = output
    let lines = Mutex<[(UInt64, UInt64)]>([])
    let ready = DispatchSemaphore(value: 0)
    output.fileHandleForReading.readabilityHandler = { handle in
        let text = String(decoding: handle.availableData, as: UTF8.self)
        if text.contains("READY") { ready.signal() }
        let gaps = text.split(separator: "\n").compactMap { line -> (UInt64, UInt64)? in
            let f = line.split(separator: " ")
            guard f.count == 3, let s = UInt64(f[1]), let e = UInt64(f[2]) else { return nil }
            return (s, e)
        }
        lines.withLock { $0 += gaps }
    }
    guard (try? target.run()) != nil, ready.wait(timeout: .now() + 10) == .success else {
        Table.row(["clock spinner did not start", "–", ""])
        return
    }
    defer {
        target.terminate()
        target.waitUntilExit()
        output.fileHandleForReading.readabilityHandler = nil
    }
    let pid = target.processIdentifier
    usleep(200_000)
    func seen(_ windows: [(UInt64, UInt64)]) -> [UInt64] {
        usleep(50_000)  // the spinner prints every 2 ms
        let gaps = lines.withLock { $0 }
        return windows.map { window in
            gaps.filter { $0.0 >= window.0 && $0.0 < window.1 }.map { $0.1 - $0.0 }.max() ?? 0
        }
    }
    func tool(_ path: String, _ arguments: [String], _ runs: Int) -> [(UInt64, UInt64)] {
        guard FileManager.default.isExecutableFile(atPath: path) else { return [] }
        var windows: [(UInt64, UInt64)] = []
        for _ in 0..<runs {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: path)
            process.arguments = arguments
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            let start = sw_monotonic_ns()
            guard (try? process.run()) != nil else { break }
            process.waitUntilExit()
            windows.append((start, sw_monotonic_ns()))
            usleep(20_000)
        }
        return windows
    }
    let configuration = StallWatchConfiguration()
    let thread = SampledThread(threadID: pid, stackLow: 0, stackHigh: 0)
    let stallwatch = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        .appendingPathComponent("stallwatch").path
    for round in 1...3 {
        let sampling = PtraceStackSampling(processID: pid, captureTimeoutNanos: 250_000_000)
        var windows: [(UInt64, UInt64)] = [], reported: [UInt64] = [], frames: [Int] = []
        for _ in 0..<200 {
            let start = sw_monotonic_ns()
            let sample = sampling.sample(thread, configuration: configuration)
            windows.append((start, sw_monotonic_ns()))
            reported.append(sample.pauseNanos ?? 0)
            frames.append(sample.addresses.count)
            usleep(10_000)
        }
        let ours = seen(windows)
        let dump = seen(tool(stallwatch, ["dump", "-p", "\(pid)", "--all-threads", "--json"], 30))
        let dumpReported = dumpPauses(stallwatch, pid: pid, runs: 30)
        let eu = seen(tool("/usr/bin/eu-stack", ["-1", "-p", "\(pid)"], 30))
        let gdb = seen(tool("/usr/bin/gdb", ["-batch", "-p", "\(pid)", "-ex", "bt"], 3))
        func median(_ values: [UInt64]) -> Double {
            values.isEmpty ? .nan : Double(values.sorted()[values.count / 2])
        }
        func p99(_ values: [UInt64]) -> Double {
            values.isEmpty ? .nan : Double(values.sorted()[min(values.count - 1, values.count * 99 / 100)])
        }
        func us(_ ns: Double) -> String { String(format: "%.0f µs", ns / 1000) }
        Table.row([
            "round \(round): stallwatch sidecar sample, seen by the target",
            "median \(us(median(ours))), p99 \(us(p99(ours)))",
            "n=200, \(frames.sorted()[100]) frames; bar median ≤ 150 µs, p99 ≤ 1 ms",
        ])
        Table.row([
            "round \(round): … as the report says (pause figure)",
            "median \(us(median(reported))), p99 \(us(p99(reported)))", "",
        ])
        Table.row([
            "round \(round): stallwatch dump -p --all-threads, seen by the target",
            dump.isEmpty ? "stallwatch not built" : "median \(us(median(dump))), p99 \(us(p99(dump)))",
            dump.isEmpty || eu.isEmpty
                ? "" : String(format: "eu-stack -1 -p's median is %.1f× this; n=30", median(eu) / median(dump)),
        ])
        Table.row([
            "round \(round): … the spinning thread's pause as the dump says (pauseMicros)",
            dumpReported.isEmpty ? "–" : "median \(us(median(dumpReported))), p99 \(us(p99(dumpReported)))",
            "one thread stopped at a time; the window above also holds the command's start-up and symbolication",
        ])
        Table.row([
            "round \(round): eu-stack -1 -p, seen by the target",
            eu.isEmpty ? "not installed" : "median \(us(median(eu))), p99 \(us(p99(eu)))",
            eu.isEmpty ? "" : String(format: "%.1f× stallwatch's median (bar ≥ 2.5×); n=30", median(eu) / median(ours)),
        ])
        Table.row([
            "round \(round): gdb -batch -p … -ex bt, seen by the target",
            gdb.isEmpty ? "not installed" : "median \(us(median(gdb)))",
            gdb.isEmpty ? "" : String(format: "%.0f× stallwatch's median; n=3", median(gdb) / median(ours)),
        ])
        fflush(nil)
    }
}

/// The pause `stallwatch dump` reports for the target's main thread (`pauseMicros`), in nanoseconds, per run.
private func dumpPauses(_ stallwatch: String, pid: Int32, runs: Int) -> [UInt64] {
    guard FileManager.default.isExecutableFile(atPath: stallwatch) else { return [] }
    var pauses: [UInt64] = []
    for _ in 0..<runs {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: stallwatch)
        process.arguments = ["dump", "-p", "\(pid)", "--json"]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { break }
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let main = (try? ProcessDump.decode(data))?.threads.first { $0.snapshot.threadId == pid }
        if let micros = main?.pauseMicros { pauses.append(UInt64(micros * 1000)) }
        usleep(20_000)
    }
    return pauses
}
