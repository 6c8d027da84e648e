// The in-process capture's pause as the captured thread sees it (a clock-spinning thread logging its own gaps), a
// blocked thread's pause, CPU spinners for the "both cores busy" rounds, and the statistics the pause rounds share.
import CStallWatchCore
import CStallWatchPtrace
import Foundation
import StallWatch
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A thread of this process, 60 frames deep, that reads CLOCK_MONOTONIC in a loop and records every gap longer than
/// 5 µs (start and end), until stopped.
final class GapLoggingThread: @unchecked Sendable {
    // @unchecked Sendable: the gap arrays are written by the spinning thread only and read after `stop()`, or
    // up to `count` (released by the writer, acquired by the reader).
    static let capacity = 1 << 16
    let starts = UnsafeMutablePointer<UInt64>.allocate(capacity: capacity)
    let ends = UnsafeMutablePointer<UInt64>.allocate(capacity: capacity)
    let count = Atomic<Int>(0)
    private let running = Atomic<Bool>(true)
    private let sampled = Mutex<SampledThread?>(nil)
    private let finished = DispatchSemaphore(value: 0)

    init() {
        Thread { [self] in
            sampled.withLock { $0 = SampledThread.current() }
            descend(60)
            finished.signal()
        }.start()
        while sampled.withLock({ $0 }) == nil { usleep(1000) }
    }

    /// The spinning thread's id and stack bounds.
    var thread: SampledThread { sampled.withLock { $0! } }

    func stop() {
        running.store(false, ordering: .relaxed)
        finished.wait()
    }

    @inline(never)
    private func descend(_ depth: Int) {
        if depth > 0 { descend(depth - 1) } else { spin() }
        _ = running.load(ordering: .relaxed)  // not a tail call: every frame stays on the stack
    }

    @inline(never)
    private func spin() {
        var last = sw_monotonic_ns()
        var logged = 0
        while running.load(ordering: .relaxed) {
            let now = sw_monotonic_ns()
            if now &- last > ClockSpinner.thresholdNs {
                starts[logged % Self.capacity] = last
                ends[logged % Self.capacity] = now
                logged += 1
                count.store(logged, ordering: .releasing)
            }
            last = now
        }
    }

    /// The longest gap that overlaps each window (0 if none: every gap there was under 5 µs).
    func longestGaps(overlapping windows: [(UInt64, UInt64)]) -> [UInt64] {
        let n = min(count.load(ordering: .acquiring), Self.capacity)
        let gaps = (0..<n).map { (starts[$0], ends[$0] - starts[$0]) }
        return PauseStatistics.longest(gaps, overlapping: windows)
    }
}

/// Medians, tails and the machine's own tail for the pause rounds.
enum PauseStatistics {
    static func median(_ values: [UInt64]) -> Double {
        values.isEmpty ? .nan : Double(values.sorted()[values.count / 2])
    }

    static func p99(_ values: [UInt64]) -> Double {
        values.isEmpty ? .nan : Double(values.sorted()[min(values.count - 1, values.count * 99 / 100)])
    }

    static func us(_ ns: Double) -> String { ns.isNaN ? "–" : String(format: "%.0f µs", ns / 1000) }

    /// The longest of `gaps` (start, length) that overlaps each window: a pause the target saw while a tool held
    /// it (a gap that began earlier, while it waited for a CPU, and ended inside the window counts whole).
    static func longest(_ gaps: [(UInt64, UInt64)], overlapping windows: [(UInt64, UInt64)]) -> [UInt64] {
        let sorted = gaps.sorted { $0.0 < $1.0 }
        let longestGap = sorted.map(\.1).max() ?? 0
        return windows.map { window in
            // Gaps that begin after the window ends cannot overlap it; none is longer than the longest.
            var low = 0, high = sorted.count
            while low < high {
                let mid = (low + high) / 2
                if sorted[mid].0 < window.0 &- longestGap { low = mid + 1 } else { high = mid }
            }
            var best: UInt64 = 0
            for gap in sorted[low...] {
                if gap.0 >= window.1 { break }
                if gap.0 &+ gap.1 > window.0 { best = max(best, gap.1) }
            }
            return best
        }
    }

    /// Each record's window from the interrupt to the detach.
    static func windows(_ records: [sw_ptrace_record]) -> [(UInt64, UInt64)] {
        records.map { ($0.stopped_at_ns &- $0.stop_wait_ns, $0.detached_at_ns) }
    }

    /// Windows as long as each of `windows`, placed `offset` after its end (in the idle time between two captures):
    /// what the target sees there is the machine's own tail, without any capture.
    static func idleWindows(after windows: [(UInt64, UInt64)], offset: UInt64) -> [(UInt64, UInt64)] {
        windows.map { ($0.1 + offset, $0.1 + offset + ($0.1 - $0.0)) }
    }
}

/// Processes that keep every CPU busy (a shell loop each, nice 0) while alive.
final class CPUSpinners {
    private var processes: [Process] = []

    init(count: Int = ProcessInfo.processInfo.activeProcessorCount) {
        for _ in 0..<count {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/bin/sh")
            process.arguments = ["-c", "while :; do :; done"]
            if (try? process.run()) != nil { processes.append(process) }
        }
        usleep(100_000)
    }

    func stop() {
        for process in processes {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        processes = []
    }
}

/// One round of in-process captures by the default path (the ptrace helper) from this thread.
enum InProcessPause {
    /// The CPU-bound thread's pauses as it sees them (the longest gap it logged overlapping each capture's
    /// interrupt → detach), the capture's own figures (interrupt → detach), and the machine's own tail: the same
    /// measure over equal windows between the captures.
    static func cpuBound(captures: Int = 200) -> (seen: [UInt64], reported: [UInt64], idle: [UInt64]) {
        let spinner = GapLoggingThread()
        defer { spinner.stop() }
        usleep(20_000)
        let records = PauseSteps.helperRecords(spinner.thread, count: captures)
        let windows = PauseStatistics.windows(records)
        let seen = spinner.longestGaps(overlapping: windows)
        let idle = spinner.longestGaps(overlapping: PauseStatistics.idleWindows(after: windows, offset: 4_000_000))
        return (seen, records.map(\.pause_ns), idle)
    }

    /// A thread blocked in a 100 ms `nanosleep` loop: the capture's own figure (interrupt → detach), the time the
    /// thread is held from its sleep.
    static func blocked(_ helper: ThreadCaptureHelper, captures: Int = 200) -> [UInt64] {
        let sampled = Mutex<SampledThread?>(nil)
        let running = Atomic<Bool>(true)
        let finished = DispatchSemaphore(value: 0)
        Thread {
            sampled.withLock { $0 = SampledThread.current() }
            while running.load(ordering: .relaxed) { usleep(100_000) }
            finished.signal()
        }.start()
        while sampled.withLock({ $0 }) == nil { usleep(1000) }
        usleep(20_000)
        let thread = sampled.withLock { $0! }
        var reported: [UInt64] = []
        for _ in 0..<captures {
            if let capture = try? helper.capture(thread, maxStackBytes: 65536, timeoutNanos: 2_000_000_000).get() {
                reported.append(capture.pauseNanoseconds)
            }
            usleep(5_000)
        }
        running.store(false, ordering: .relaxed)
        finished.wait()
        return reported
    }
}

/// Where a capture's pause goes, step by step, from the tracer's own clock stamps (sw_ptrace_record).
enum PauseSteps {
    /// The in-process helper's records for `count` captures of `thread` (what ``ThreadCaptureHelper`` does before
    /// it unwinds the copy).
    static func helperRecords(_ thread: SampledThread, count: Int = 200) -> [sw_ptrace_record] {
        let stack = UnsafeMutablePointer<UInt8>.allocate(capacity: 65536)
        defer { stack.deallocate() }
        var records: [sw_ptrace_record] = []
        for _ in 0..<count {
            var record = sw_ptrace_record()
            let status = sw_helper_capture(
                thread.threadID, thread.stackLow, thread.stackHigh, 2_000_000_000, &record, stack, 65536)
            if status == 0 { records.append(record) }
            usleep(10_000)
        }
        return records
    }

    /// The sidecar tracer's records for `count` captures of thread `pid` of process `pid`.
    static func sidecarRecords(pid: Int32, count: Int = 200) -> [sw_ptrace_record] {
        let stack = UnsafeMutablePointer<UInt8>.allocate(capacity: 65536)
        defer { stack.deallocate() }
        var records: [sw_ptrace_record] = []
        for _ in 0..<count {
            var record = sw_ptrace_record()
            if sw_ptrace_capture(pid, pid, 250_000_000, stack, 65536, &record) == 0 { records.append(record) }
            usleep(10_000)
        }
        return records
    }

    /// One row per step: interrupt → stop seen, → registers read, → stack copied, → detached.
    static func rows(_ label: String, _ records: [sw_ptrace_record]) {
        typealias S = PauseStatistics
        func cell(_ values: [UInt64]) -> String { "median \(S.us(S.median(values))), p99 \(S.us(S.p99(values)))" }
        let onTargetCPU = records.filter { $0.target_cpu >= 0 && $0.tracer_cpu == $0.target_cpu }.count
        Table.row([
            "\(label): interrupt → stop seen", cell(records.map(\.stop_wait_ns)),
            "n=\(records.count); tracer on the target's CPU in \(onTargetCPU)",
        ])
        Table.row([
            "\(label): stop seen → registers read (GETREGS, SETREGS when restarting a call)",
            cell(records.map { $0.registers_at_ns &- $0.stopped_at_ns }), "",
        ])
        Table.row([
            "\(label): registers → stack and red zone copied (one process_vm_readv)",
            cell(records.map { $0.stack_read_at_ns &- $0.registers_at_ns }),
            "\(Int(S.median(records.map { UInt64($0.stack_size) }))) B copied (median)",
        ])
        Table.row([
            "\(label): stack copied → detached (PTRACE_DETACH)",
            cell(records.map { $0.detached_at_ns &- $0.stack_read_at_ns }), "",
        ])
        Table.row(["\(label): interrupt → detached (the tracer's pause figure)", cell(records.map(\.pause_ns)), ""])
    }
}
