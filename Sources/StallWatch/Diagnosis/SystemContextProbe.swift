// Measuring the process and machine around a stall: CPU use, load, cgroup throttling, steal.
import CStallWatchCore
import Foundation

/// Takes a snapshot when a stall begins and turns the difference at its end into a `SystemContext`, so that
/// "the machine was starved" is visible next to the stack.
struct SystemContextProbe: Sendable {
    struct Snapshot: Sendable {
        var monotonicNanos: UInt64
        var processCPUNanos: UInt64?
        var loopCPUNanos: UInt64?
        var throttledPeriods: UInt64?
        var throttledMicros: UInt64?
        var steal: (steal: UInt64, total: UInt64)?
        var disks: [String: ProcSystem.DiskCounters]?
        var processIOBytes: UInt64?
    }

    let pid: Int32
    let loopThreadID: Int32
    private let start: Snapshot
    private let cpuStatPath: String?
    /// The process's storage I/O at its latest reading: a process that exits mid-stall keeps its figure.
    private var lastProcessIOBytes: UInt64?

    /// Snapshots now (at detection).
    init(pid: Int32, loopThreadID: Int32, monotonicNanos: UInt64) {
        self.pid = pid
        self.loopThreadID = loopThreadID
        cpuStatPath = Self.cgroupCPUStatPath(pid: pid)
        start = Self.snapshot(pid: pid, tid: loopThreadID, cpuStatPath: cpuStatPath, now: monotonicNanos)
        lastProcessIOBytes = start.processIOBytes
    }

    /// Reads the process's storage I/O again (at each sample), so the figure survives the process's exit.
    mutating func noteProcessIO() {
        if let bytes = Self.processIOBytes(pid: pid) { lastProcessIOBytes = bytes }
    }

    /// The context from the snapshot to now.
    ///
    /// Percentages are over the interval actually measured (the two snapshots' own clock readings, not the
    /// stall's end time, which may precede the last look) and bounded by the CPU count.
    func finish(monotonicNanos: UInt64) -> StallReport.SystemContext {
        let end = Self.snapshot(
            pid: pid, tid: loopThreadID, cpuStatPath: cpuStatPath, now: max(monotonicNanos, sw_monotonic_ns()))
        let cpus = max(1, ProcessInfo.processInfo.activeProcessorCount)
        var context = StallReport.SystemContext()
        // CPU time is counted in clock ticks (10 ms): below a second the figure is too coarse to mean anything.
        let wall = Double(max(1, end.monotonicNanos &- start.monotonicNanos))
        func percent(_ a: UInt64?, _ b: UInt64?, bound: Int) -> Double? {
            guard let a, let b, b >= a else { return nil }
            return min(Double(bound) * 100, (Double(b - a) / wall * 1000).rounded() / 10)
        }
        context.processCpuPercent = percent(start.processCPUNanos, end.processCPUNanos, bound: cpus)
        context.loopCpuPercent = percent(start.loopCPUNanos, end.loopCPUNanos, bound: 1)
        context.loadAverage = ProcSystem.loadAverage()
        context.cpuCount = cpus
        if let a = start.throttledPeriods, let b = end.throttledPeriods, b >= a {
            context.cgroupThrottledPeriods = b - a
        }
        if let a = start.throttledMicros, let b = end.throttledMicros, b >= a {
            context.cgroupThrottledMs = Double(b - a) / 1000
        }
        if let a = start.steal, let b = end.steal, b.total > a.total {
            context.stealPercent = (Double(b.steal &- a.steal) / Double(b.total - a.total) * 1000).rounded() / 10
        }
        // The busiest whole disk over the interval, and what the process itself moved meanwhile.
        if let before = start.disks, let after = end.disks {
            let busiest = after.compactMap { name, b -> (busy: UInt64, bytes: UInt64)? in
                guard let a = before[name], b.busyMillis >= a.busyMillis, b.bytes >= a.bytes else { return nil }
                return (b.busyMillis - a.busyMillis, b.bytes - a.bytes)
            }.max { ($0.busy, $0.bytes) < ($1.busy, $1.bytes) }
            if let busiest {
                context.diskBusyPercent = min(100, (Double(busiest.busy) * 1_000_000 / wall * 1000).rounded() / 10)
                context.diskMiB = Self.mebibytes(busiest.bytes)
            }
        }
        if let a = start.processIOBytes, let b = end.processIOBytes ?? lastProcessIOBytes, b >= a {
            context.processDiskMiB = Self.mebibytes(b - a)
        }
        return context
    }

    private static func mebibytes(_ bytes: UInt64) -> Double { (Double(bytes) / 1_048_576 * 10).rounded() / 10 }

    /// `read_bytes` + `write_bytes` of `/proc/PID/io`: the storage I/O the process caused.
    static func processIOBytes(pid: Int32) -> UInt64? {
        guard let text = ProcDirectory(processID: pid).text("io") else { return nil }
        var total: UInt64 = 0
        var found = 0
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: " ")
            guard parts.count == 2, parts[0] == "read_bytes:" || parts[0] == "write_bytes:",
                let value = UInt64(parts[1])
            else { continue }
            total &+= value
            found += 1
        }
        return found == 2 ? total : nil
    }

    static func snapshot(pid: Int32, tid: Int32, cpuStatPath: String?, now: UInt64) -> Snapshot {
        var s = Snapshot(monotonicNanos: max(now, sw_monotonic_ns()))
        s.processCPUNanos = ProcDirectory(processID: pid).stat()?.cpuNanos
        s.loopCPUNanos = ThreadProbe.read(pid: pid, tid: tid)?.cpuNanos
        if let cpuStatPath, let text = ProcFile.text(cpuStatPath) {
            for line in text.split(separator: "\n") {
                let parts = line.split(separator: " ")
                guard parts.count == 2 else { continue }
                if parts[0] == "nr_throttled" { s.throttledPeriods = UInt64(parts[1]) }
                if parts[0] == "throttled_usec" { s.throttledMicros = UInt64(parts[1]) }
                if parts[0] == "throttled_time" { s.throttledMicros = UInt64(parts[1]).map { $0 / 1000 } }  // v1: ns
            }
        }
        s.steal = ProcSystem.cpuSteal()
        s.disks = ProcSystem.diskCounters()
        s.processIOBytes = processIOBytes(pid: pid)
        return s
    }

    /// The process's `cpu.stat`: its cgroup v1 cpu controller group's (`nr_throttled`, `throttled_time` in ns),
    /// where CPU quotas are enforced on a hybrid hierarchy, else its cgroup v2 group's (`throttled_usec`).
    static func cgroupCPUStatPath(pid: Int32) -> String? {
        guard let text = ProcDirectory(processID: pid).text("cgroup") else { return nil }
        let lines = text.split(separator: "\n")
        for line in lines {
            let fields = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
            guard fields.count == 3, fields[1].split(separator: ",").contains("cpu") else { continue }
            for mount in ["/sys/fs/cgroup/\(fields[1])", "/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/cpu"] {
                let path = mount + fields[2] + "/cpu.stat"
                if FileManager.default.isReadableFile(atPath: path) { return path }
            }
        }
        for line in lines where line.hasPrefix("0::") {
            let path = "/sys/fs/cgroup" + line.dropFirst(3) + "/cpu.stat"
            return FileManager.default.isReadableFile(atPath: path) ? path : nil
        }
        return nil
    }
}
