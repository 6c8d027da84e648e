// Time inside StallWatch: nanoseconds of CLOCK_MONOTONIC as UInt64, and the one conversion from Duration.

/// Every instant StallWatch measures is a `UInt64` of CLOCK_MONOTONIC nanoseconds (`sw_monotonic_ns`, the unit
/// of every clock reading, of the C layer and of the loop's published words), and every span a `UInt64` of
/// nanoseconds. Settings in milliseconds are decoded once (``StallWatchConfiguration/intervals``); a public API
/// that takes a `Duration` converts it here, once; reports turn nanoseconds into their milliseconds and
/// microseconds in the report codec (``StallReport/milliseconds(_:)``).
extension Duration {
    /// The duration in nanoseconds, clamped to 0 … `UInt64.max` (a negative duration is 0).
    package var nanoseconds: UInt64 {
        let (seconds, attoseconds) = components
        if seconds < 0 || (seconds == 0 && attoseconds < 0) { return 0 }
        let (whole, overflow) = UInt64(seconds).multipliedReportingOverflow(by: 1_000_000_000)
        return overflow ? .max : whole &+ UInt64(attoseconds / 1_000_000_000)
    }
}

/// `nanoseconds` for people: "100 ms", "1.5 s", "250 us".
package func describeNanoseconds(_ nanoseconds: UInt64) -> String {
    if nanoseconds >= 1_000_000_000 { return "\(Double(nanoseconds) / 1e9) s" }
    if nanoseconds >= 1_000_000 {
        return nanoseconds % 1_000_000 == 0
            ? "\(nanoseconds / 1_000_000) ms" : "\(Double(nanoseconds) / 1e6) ms"
    }
    return "\(nanoseconds / 1000) us"
}
