// Measuring the process and machine around a stall: CPU use, load, cgroup throttling, steal.
import Foundation

/// Takes a snapshot when a stall begins and turns the difference at its end into a `SystemContext`, so that
/// "the machine was starved" is visible next to the stack.
public struct SystemContextProbe: Sendable {
    struct Snapshot: Sendable {
        var monotonicNanos: UInt64
        var processCPUNanos: UInt64?
        var loopCPUNanos: UInt64?
        var throttledPeriods: UInt64?
        var throttledMicros: UInt64?
        var steal: (steal: UInt64, total: UInt64)?
    }

    public let pid: Int32
    public let loopThreadID: Int32
    private let start: Snapshot
    private let cpuStatPath: String?

    /// Snapshots now (at detection).
    public init(pid: Int32, loopThreadID: Int32, monotonicNanos: UInt64) {
        self.pid = pid
        self.loopThreadID = loopThreadID
        cpuStatPath = Self.cgroupCPUStatPath(pid: pid)
        start = Self.snapshot(pid: pid, tid: loopThreadID, cpuStatPath: cpuStatPath, now: monotonicNanos)
    }

    /// The context from the snapshot to now.
    public func finish(monotonicNanos: UInt64) -> StallReport.SystemContext {
        let end = Self.snapshot(pid: pid, tid: loopThreadID, cpuStatPath: cpuStatPath, now: monotonicNanos)
        let wall = Double(max(1, end.monotonicNanos &- start.monotonicNanos))
        var context = StallReport.SystemContext()
        func percent(_ a: UInt64?, _ b: UInt64?) -> Double? {
            guard let a, let b, b >= a else { return nil }
            return (Double(b - a) / wall * 1000).rounded() / 10
        }
        context.processCpuPercent = percent(start.processCPUNanos, end.processCPUNanos)
        context.loopCpuPercent = percent(start.loopCPUNanos, end.loopCPUNanos)
        if let load = ProcFile.text("/proc/loadavg") {
            context.loadAverage = load.split(separator: " ").prefix(3).compactMap { Double($0) }
        }
        context.cpuCount = ProcessInfo.processInfo.activeProcessorCount
        if let a = start.throttledPeriods, let b = end.throttledPeriods, b >= a {
            context.cgroupThrottledPeriods = b - a
        }
        if let a = start.throttledMicros, let b = end.throttledMicros, b >= a {
            context.cgroupThrottledMs = Double(b - a) / 1000
        }
        if let a = start.steal, let b = end.steal, b.total > a.total {
            context.stealPercent = (Double(b.steal &- a.steal) / Double(b.total - a.total) * 1000).rounded() / 10
        }
        return context
    }

    static func snapshot(pid: Int32, tid: Int32, cpuStatPath: String?, now: UInt64) -> Snapshot {
        var s = Snapshot(monotonicNanos: now)
        s.processCPUNanos = processCPU(pid: pid)
        s.loopCPUNanos = ThreadProbe.read(pid: pid, tid: tid)?.cpuNanos
        if let cpuStatPath, let text = ProcFile.text(cpuStatPath) {
            for line in text.split(separator: "\n") {
                let parts = line.split(separator: " ")
                guard parts.count == 2 else { continue }
                if parts[0] == "nr_throttled" { s.throttledPeriods = UInt64(parts[1]) }
                if parts[0] == "throttled_usec" { s.throttledMicros = UInt64(parts[1]) }
            }
        }
        if let stat = ProcFile.text("/proc/stat"), let first = stat.split(separator: "\n").first,
            first.hasPrefix("cpu ")
        {
            let values = first.split(separator: " ").dropFirst().compactMap { UInt64($0) }
            if values.count >= 8 { s.steal = (values[7], values.prefix(8).reduce(0, +)) }
        }
        return s
    }

    /// utime + stime of the whole process, nanoseconds.
    static func processCPU(pid: Int32) -> UInt64? {
        guard let stat = ProcFile.text("/proc/\(pid)/stat"), let close = stat.lastIndex(of: ")") else { return nil }
        let fields = stat[stat.index(close, offsetBy: 2)...].split(separator: " ")
        guard fields.count > 13, let u = UInt64(fields[11]), let s = UInt64(fields[12]) else { return nil }
        return (u + s) * 1_000_000_000 / UInt64(max(1, sysconf(Int32(_SC_CLK_TCK))))
    }

    /// `/sys/fs/cgroup/<path>/cpu.stat` for the process's cgroup v2 group, if present.
    static func cgroupCPUStatPath(pid: Int32) -> String? {
        guard let text = ProcFile.text("/proc/\(pid)/cgroup") else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("0::") {
            let path = "/sys/fs/cgroup" + line.dropFirst(3) + "/cpu.stat"
            return FileManager.default.isReadableFile(atPath: path) ? path : nil
        }
        return nil
    }
}
