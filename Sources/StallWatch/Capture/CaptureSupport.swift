// CaptureSupport: small helpers shared by the capture stage (durations, a thread's /proc state).
#if canImport(Glibc)
import Glibc
#endif

/// Helpers for the samplers; namespaced so they cannot collide with other stages' extensions.
enum CaptureSupport {
    /// `duration` in nanoseconds, clamped to 0 … UInt64.max.
    static func nanoseconds(_ duration: Duration) -> UInt64 {
        let (seconds, attoseconds) = duration.components
        if seconds < 0 { return 0 }
        let (whole, overflow) = UInt64(seconds).multipliedReportingOverflow(by: 1_000_000_000)
        return overflow ? .max : whole &+ UInt64(attoseconds / 1_000_000_000)
    }

    /// `duration` for people: "100 ms", "1.5 s", "250 us".
    static func describe(_ duration: Duration) -> String {
        let ns = nanoseconds(duration)
        if ns >= 1_000_000_000 { return "\(Double(ns) / 1e9) s" }
        if ns >= 1_000_000 { return ns % 1_000_000 == 0 ? "\(ns / 1_000_000) ms" : "\(Double(ns) / 1e6) ms" }
        return "\(ns / 1000) us"
    }

    /// The state letter of `/proc/<pid>/task/<tid>/stat` (the field after the command name), or nil.
    static func threadState(processID: Int32, threadID: Int32) -> Character? {
        let path = "/proc/\(processID)/task/\(threadID)/stat"
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 1024)
        let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard count > 0 else { return nil }
        // The command name may contain ") ": the state follows the last ')'.
        guard let close = buffer[..<count].lastIndex(of: UInt8(ascii: ")")), close + 2 < count else { return nil }
        return Character(Unicode.Scalar(buffer[close + 2]))
    }

    /// "S (sleeping)" for a state letter, as proc(5) names them.
    static func describe(state: Character?) -> String {
        guard let state else { return "unknown (thread gone?)" }
        let names: [Character: String] = [
            "R": "running", "S": "sleeping", "D": "disk sleep", "T": "stopped", "t": "tracing stop",
            "Z": "zombie", "X": "dead", "I": "idle", "P": "parked", "W": "waking", "K": "wakekill",
        ]
        return "\(state) (\(names[state] ?? "unknown"))"
    }
}
