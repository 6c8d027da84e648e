// ProcSystem: the machine-wide /proc files StallWatch reads (load, CPU time, the ptrace policy).

/// Readers for `/proc` files that describe the machine rather than one process.
package enum ProcSystem {
    /// `/proc/loadavg`'s 1, 5 and 15 minute load averages.
    package static func loadAverage() -> [Double]? {
        ProcFile.text("/proc/loadavg").map { $0.split(separator: " ").prefix(3).compactMap { Double($0) } }
    }

    /// The first (`cpu`) line of `/proc/stat`: steal time and the total of its first eight columns, in clock ticks.
    static func cpuSteal() -> (steal: UInt64, total: UInt64)? {
        guard let stat = ProcFile.text("/proc/stat"), let first = stat.split(separator: "\n").first,
            first.hasPrefix("cpu ")
        else { return nil }
        let values = first.split(separator: " ").dropFirst().compactMap { UInt64($0) }
        return values.count >= 8 ? (values[7], values.prefix(8).reduce(0, +)) : nil
    }

    /// Yama's `ptrace_scope` (0 classic, 1 restricted to ancestors, 2 admin only, 3 none); nil without Yama.
    package static func ptraceScope() -> String? { ProcFile.text("/proc/sys/kernel/yama/ptrace_scope") }
}
