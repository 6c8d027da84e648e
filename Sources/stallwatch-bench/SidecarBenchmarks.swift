// Sidecar benchmarks (DESIGN §11): the target's pause and the end-to-end time per ptrace sample, side by side with
// `stallwatch dump`, eu-stack and gdb on the same target, and the sidecar's CPU use while watching an idle and a busy target.
import CStallWatchCore
import Foundation
import StallWatch
import StallWatchSidecar

/// Runs the sidecar benchmarks and prints two tables (about 30 s; eu-stack and gdb rows are skipped when missing).
func runSidecarBenchmarks() {
    print("## Sidecar (ptrace snapshot of another process; eu-stack and gdb on the same target)\n")
    let demo = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        .appendingPathComponent("stallwatch-demo").path
    guard FileManager.default.isExecutableFile(atPath: demo) else {
        print("stallwatch-demo not found next to the benchmark: skipped\n")
        return
    }
    // A target stuck on CPU for the whole measurement, nobody inside watching.
    guard
        let busy = try? launch(
            demo,
            [
                "stall", "--kind", "cpu", "--duration-ms", "60000", "--delay-ms", "0",
                "--no-watchdog", "--no-heartbeat",
            ])
    else { return }
    defer { busy.terminate() }
    usleep(300_000)
    let pid = busy.processIdentifier
    print("| what | n | median | p99 | notes |")
    print("|---|---|---|---|---|")
    let configuration = StallWatchConfiguration()
    let sampling = PtraceStackSampling(processID: pid, captureTimeoutNanos: 250_000_000)
    let thread = SampledThread(threadID: pid, stackLow: 0, stackHigh: 0)
    var pauses: [UInt64] = [], ends: [UInt64] = [], frames: [Int] = []
    for _ in 0..<1000 {
        let start = sw_monotonic_ns()
        let sample = sampling.sample(thread, configuration: configuration)
        ends.append(sw_monotonic_ns() - start)
        if let pause = sample.pauseNanos { pauses.append(pause) }
        frames.append(sample.addresses.count)
        usleep(2000)
    }
    let medianFrames = frames.sorted()[frames.count / 2]
    row("stallwatch ptrace: target pause", pauses, "SEIZE+INTERRUPT → DETACH")
    row("stallwatch ptrace: capture + unwind", ends, "\(medianFrames) frames (median)")
    let stallwatch = URL(fileURLWithPath: demo).deletingLastPathComponent().appendingPathComponent("stallwatch").path
    for (tool, arguments, runs, note) in [
        (stallwatch, ["dump", "-p", "\(pid)", "--all-threads", "--json"], 50, "one thread stopped at a time"),
        ("/usr/bin/eu-stack", ["-p", "\(pid)"], 50, "stops every thread; pause ≤ wall"),
        ("/usr/bin/gdb", ["-p", "\(pid)", "-batch", "-ex", "bt"], 5, "stops every thread; pause ≤ wall"),
    ] {
        guard FileManager.default.isExecutableFile(atPath: tool) else {
            print("| \(tool) | 0 | – | – | not installed: skipped |")
            continue
        }
        var walls: [UInt64] = []
        for _ in 0..<runs {
            let start = sw_monotonic_ns()
            guard let process = try? launch(tool, arguments, quiet: true) else { break }
            process.waitUntilExit()
            walls.append(sw_monotonic_ns() - start)
        }
        row(
            "\(URL(fileURLWithPath: tool).lastPathComponent) \(arguments.prefix(2).joined(separator: " ")) …: wall",
            walls, note)
    }
    print("")
    benchmarkWatcherCPU(demo: demo)
}

/// CPU the sidecar uses while watching a loop that is idle and one that serves continuous work.
private func benchmarkWatcherCPU(demo: String) {
    print("| sidecar watching | source | seconds | CPU used | CPU % |")
    print("|---|---|---|---|---|")
    // Idle: the demo's loop waits (a stall scheduled far in the future); busy: the same loop stuck on CPU.
    let targets: [(String, [String])] = [
        ("idle loop", ["stall", "--kind", "sleep", "--delay-ms", "600000", "--no-watchdog"]),
        ("busy loop", ["stall", "--kind", "cpu", "--duration-ms", "600000", "--delay-ms", "0", "--no-watchdog"]),
    ]
    for (label, arguments) in targets {
        for proc in [false, true] {
            guard let target = try? launch(demo, arguments + (proc ? ["--no-heartbeat"] : [])) else { continue }
            defer { target.terminate() }
            usleep(400_000)
            var options = TargetWatcher.Options(pid: target.processIdentifier, configuration: StallWatchConfiguration())
            options.configuration.reportDirectory = NSTemporaryDirectory() + "stallwatch-bench-sidecar"
            options.configuration.maxSamples = 20
            guard let watcher = try? TargetWatcher(options: options, onEvent: { _ in }) else { continue }
            let before = processCPU()
            let start = sw_monotonic_ns()
            let done = DispatchSemaphore(value: 0)
            Thread {
                _ = watcher.run()
                done.signal()
            }.start()
            usleep(3_000_000)
            watcher.stop()
            done.wait()
            let cpu = processCPU() - before
            let wall = sw_monotonic_ns() - start
            print(
                String(
                    format: "| %@ | %@ | %.1f | %.1f ms | %.2f%% |", label, watcher.source.rawValue, Double(wall) / 1e9,
                    Double(cpu) / 1e6, Double(cpu) / Double(wall) * 100))
        }
    }
    print("\n(the busy loop is stuck: the sidecar reports it and samples it up to maxSamples = 20 times)\n")
}

private func launch(_ path: String, _ arguments: [String], quiet: Bool = false) throws -> Process {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: path)
    process.arguments = arguments
    process.standardOutput = FileHandle.nullDevice
    if quiet { process.standardError = FileHandle.nullDevice }
    try process.run()
    return process
}

private func processCPU() -> UInt64 {
    var usage = rusage()
    getrusage(Int32(RUSAGE_SELF.rawValue), &usage)
    func ns(_ t: timeval) -> UInt64 { UInt64(t.tv_sec) * 1_000_000_000 + UInt64(t.tv_usec) * 1000 }
    return ns(usage.ru_utime) + ns(usage.ru_stime)
}
