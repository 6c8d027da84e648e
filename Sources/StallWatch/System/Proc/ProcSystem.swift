// ProcSystem: the machine-wide /proc files StallWatch reads (load, CPU time, disks, the ptrace policy).
#if canImport(Glibc)
    import Glibc
#endif

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

    /// One block device's counters from `/proc/diskstats`: milliseconds it spent doing I/O (`io_ticks`) and bytes
    /// it read and wrote.
    struct DiskCounters: Sendable, Equatable {
        var busyMillis: UInt64
        var bytes: UInt64
    }

    /// The counters of each whole disk (`/sys/block`), keyed by name; loop, RAM and compressed-RAM devices are left
    /// out (their I/O lands on a real disk or in memory). Nil when `/proc/diskstats` cannot be read.
    static func diskCounters() -> [String: DiskCounters]? {
        guard let text = ProcFile.text("/proc/diskstats") else { return nil }
        return parseDiskCounters(text) { access("/sys/block/\($0)", F_OK) == 0 }
    }

    /// ``diskCounters()`` from the text of `/proc/diskstats`; `isWholeDisk` tells a disk from a partition.
    static func parseDiskCounters(_ text: String, isWholeDisk: (String) -> Bool) -> [String: DiskCounters] {
        var disks: [String: DiskCounters] = [:]
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ")
            // major minor name reads merged sectors ms writes merged sectors ms in-flight io_ticks …
            guard fields.count >= 13 else { continue }
            let name = String(fields[2])
            guard !["loop", "ram", "zram"].contains(where: name.hasPrefix), isWholeDisk(name),
                let read = UInt64(fields[5]), let written = UInt64(fields[9]), let busy = UInt64(fields[12])
            else { continue }
            let (sectors, overflow) = read.addingReportingOverflow(written)
            disks[name] = DiskCounters(busyMillis: busy, bytes: overflow ? .max : sectors &* 512)
        }
        return disks
    }

    /// Yama's `ptrace_scope` (0 classic, 1 restricted to ancestors, 2 admin only, 3 none); nil without Yama.
    package static func ptraceScope() -> String? { ProcFile.text("/proc/sys/kernel/yama/ptrace_scope") }
}
