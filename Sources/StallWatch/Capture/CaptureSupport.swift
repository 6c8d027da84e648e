// CaptureSupport: small helpers shared by the capture stage (durations).

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
}
