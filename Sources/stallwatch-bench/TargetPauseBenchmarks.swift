// The pause as the target sees it: a clock-spinning target logs every gap; stallwatch's sidecar (a sample, and
// `stallwatch dump`) and in-process capture vs eu-stack vs gdb, quiet and with every CPU busy.
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

/// Five quiet rounds, then five with every CPU kept busy by spinners, on one clock-spinning target: stallwatch's
/// sidecar sample (capture + unwind), `eu-stack -1 -p` side by side, the in-process default capture (the ptrace
/// helper) of a clock-spinning and of a sleeping thread of this process; in quiet rounds also `stallwatch dump -p`
/// (the whole command, every thread, and the fresh tracer's own pause figure) and `gdb -batch`. Each tool's pause
/// is the longest gap the target logged that began during the tool's call; the machine's own tail is the same
/// measure over equal windows between the captures. Ends with the number of rounds meeting each bar.
func runTargetPauseBenchmarks() {
    Table.header("Pause as the target sees it (clock-spinning thread, 60 frames deep), side by side with eu-stack")
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
            return (s, e - s)
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
    usleep(200_000)
    let helper = try? ThreadCaptureHelper.shared()
    var tally = PauseBars()
    for loaded in [false, true] {
        let spinners = loaded ? CPUSpinners() : nil
        for round in 1...5 {
            let label = "\(loaded ? "busy" : "quiet") \(round)"
            tally.add(sidecarRound(label, pid: target.processIdentifier, lines: lines, full: !loaded), loaded: loaded)
            if let helper {
                // The clock spinner is held stopped meanwhile, so that it keeps no CPU busy in a quiet round.
                kill(target.processIdentifier, SIGSTOP)
                tally.add(inProcessRound(label, helper), loaded: loaded)
                kill(target.processIdentifier, SIGCONT)
            }
            fflush(nil)
        }
        let condition = loaded ? "busy" : "quiet"
        PauseSteps.rows("\(condition): sidecar, step", PauseSteps.sidecarRecords(pid: target.processIdentifier))
        if helper != nil {
            kill(target.processIdentifier, SIGSTOP)
            let spinner = GapLoggingThread()
            PauseSteps.rows("\(condition): in-process, step", PauseSteps.helperRecords(spinner.thread))
            spinner.stop()
            kill(target.processIdentifier, SIGCONT)
        }
        fflush(nil)
        spinners?.stop()
    }
    tally.print()
}

/// Which bars each round met (issue bars: sidecar ≤ 120 µs median, p99 ≤ 1 ms or the machine's own tail, ≥ 2.5×
/// below eu-stack; in-process ≤ 40 µs CPU-bound, ≤ 150 µs blocked, p99 ≤ 1 ms; ≤ 1 ms median on busy CPUs).
struct PauseBars {
    var sidecar = [0, 0], inProcessCPU = [0, 0], inProcessBlocked = [0, 0], rounds = [0, 0]

    struct Round {
        var sidecar: Bool?, inProcessCPU: Bool?, inProcessBlocked: Bool?
    }

    mutating func add(_ round: Round, loaded: Bool) {
        let i = loaded ? 1 : 0
        if let met = round.sidecar {
            rounds[i] += 1
            sidecar[i] += met ? 1 : 0
        }
        if let met = round.inProcessCPU { inProcessCPU[i] += met ? 1 : 0 }
        if let met = round.inProcessBlocked { inProcessBlocked[i] += met ? 1 : 0 }
    }

    func print() {
        Table.row([
            "rounds meeting the bars, quiet",
            "sidecar \(sidecar[0])/\(rounds[0]), in-process CPU-bound \(inProcessCPU[0])/\(rounds[0]), "
                + "blocked \(inProcessBlocked[0])/\(rounds[0])",
            "sidecar ≤ 120 µs median, p99 ≤ 1 ms or the machine's tail, ≥ 2.5× below eu-stack (4 of 5); "
                + "in-process ≤ 40 µs / ≤ 150 µs median, p99 ≤ 1 ms",
        ])
        Table.row([
            "rounds meeting the bars, every CPU busy",
            "sidecar \(sidecar[1])/\(rounds[1]), in-process CPU-bound \(inProcessCPU[1])/\(rounds[1]), "
                + "blocked \(inProcessBlocked[1])/\(rounds[1])",
            "≤ 1 ms median (the sidecar's eu-stack ratio still applies)",
        ])
    }
}

private func sidecarRound(_ label: String, pid: Int32, lines: borrowing Mutex<[(UInt64, UInt64)]>, full: Bool)
    -> PauseBars.Round
{
    func seen(_ windows: [(UInt64, UInt64)]) -> [UInt64] {
        usleep(50_000)  // the spinner prints every 2 ms
        return PauseStatistics.longest(lines.withLock { $0 }, overlapping: windows)
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
    let records = PauseSteps.sidecarRecords(pid: pid)
    let captureWindows = PauseStatistics.windows(records)
    let captured = seen(captureWindows)
    let idle = seen(PauseStatistics.idleWindows(after: captureWindows, offset: 4_000_000))
    let eu = seen(tool("/usr/bin/eu-stack", ["-1", "-p", "\(pid)"], 30))
    typealias S = PauseStatistics
    let ratio = S.median(eu) / S.median(ours)
    let tailMet = S.p99(captured) <= max(1_000_000, S.p99(idle))
    let met = S.median(captured) <= 120_000 && tailMet && ratio >= 2.5
    Table.row([
        "\(label): stallwatch sidecar capture, seen by the target (interrupt → detach)",
        "median \(S.us(S.median(captured))), p99 \(S.us(S.p99(captured)))",
        "n=\(records.count); the machine's own, in equal windows between captures: median "
            + "\(S.us(S.median(idle))), p99 \(S.us(S.p99(idle))); "
            + (met ? "bar met" : "bar missed"),
    ])
    Table.row([
        "\(label): stallwatch sidecar sample (capture + unwind), seen by the target over the whole call",
        "median \(S.us(S.median(ours))), p99 \(S.us(S.p99(ours)))",
        "n=200, \(frames.sorted()[100]) frames; the same measure as eu-stack's below",
    ])
    Table.row([
        "\(label): … as the report says (pause figure)",
        "median \(S.us(S.median(reported))), p99 \(S.us(S.p99(reported)))", "",
    ])
    Table.row([
        "\(label): eu-stack -1 -p, seen by the target",
        eu.isEmpty ? "not installed" : "median \(S.us(S.median(eu))), p99 \(S.us(S.p99(eu)))",
        eu.isEmpty ? "" : String(format: "%.1f× stallwatch's median (bar ≥ 2.5×); n=30", ratio),
    ])
    if full {
        let dump = seen(tool(stallwatch, ["dump", "-p", "\(pid)", "--all-threads", "--json"], 30))
        let dumpReported = dumpPauses(stallwatch, pid: pid, runs: 30)
        let gdb = seen(tool("/usr/bin/gdb", ["-batch", "-p", "\(pid)", "-ex", "bt"], 3))
        Table.row([
            "\(label): stallwatch dump -p --all-threads, seen by the target",
            dump.isEmpty ? "stallwatch not built" : "median \(S.us(S.median(dump))), p99 \(S.us(S.p99(dump)))",
            dump.isEmpty || eu.isEmpty
                ? "" : String(format: "eu-stack -1 -p's median is %.1f× this; n=30", S.median(eu) / S.median(dump)),
        ])
        Table.row([
            "\(label): … the spinning thread's pause as the dump says (pauseMicros, a fresh tracer's capture)",
            dumpReported.isEmpty ? "–" : "median \(S.us(S.median(dumpReported))), p99 \(S.us(S.p99(dumpReported)))",
            "one thread stopped at a time; the window above also holds the command's start-up and symbolication",
        ])
        Table.row([
            "\(label): gdb -batch -p … -ex bt, seen by the target",
            gdb.isEmpty ? "not installed" : "median \(S.us(S.median(gdb)))",
            gdb.isEmpty ? "" : String(format: "%.0f× stallwatch's median; n=3", S.median(gdb) / S.median(ours)),
        ])
    }
    return PauseBars.Round(sidecar: met)
}

private func inProcessRound(_ label: String, _ helper: ThreadCaptureHelper) -> PauseBars.Round {
    typealias S = PauseStatistics
    let loaded = label.hasPrefix("busy")
    let cpu = InProcessPause.cpuBound()
    let blocked = InProcessPause.blocked(helper)
    let cpuTail = S.p99(cpu.seen) <= max(1_000_000, S.p99(cpu.idle))
    let cpuMet = S.median(cpu.seen) <= (loaded ? 1_000_000 : 40_000) && (loaded || cpuTail)
    let blockedMet = S.median(blocked) <= (loaded ? 1_000_000 : 150_000) && (loaded || S.p99(blocked) <= 1_000_000)
    Table.row([
        "\(label): in-process capture (ptrace helper) of a CPU-bound thread, seen by it",
        "median \(S.us(S.median(cpu.seen))), p99 \(S.us(S.p99(cpu.seen)))",
        "n=200; capture's own figure \(S.us(S.median(cpu.reported))) median; the machine's own median "
            + "\(S.us(S.median(cpu.idle))), p99 \(S.us(S.p99(cpu.idle))); " + (cpuMet ? "bar met" : "bar missed"),
    ])
    Table.row([
        "\(label): in-process capture of a sleeping thread (capture's own figure)",
        "median \(S.us(S.median(blocked))), p99 \(S.us(S.p99(blocked)))",
        "n=\(blocked.count); interrupt → detach; " + (blockedMet ? "bar met" : "bar missed"),
    ])
    return PauseBars.Round(inProcessCPU: cpuMet, inProcessBlocked: blockedMet)
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
