// DetectionStrategy: how a watchdog learns that its loop stopped turning (the `strategy` setting).

/// How the watchdog waits on the loop; the `strategy` key of the configuration and `detection.strategy` of a
/// report. Encoded as its raw value (`"deadline"`, `"classic"`).
public enum DetectionStrategy: String, Codable, Sendable, CaseIterable {
    /// Wait exactly until the current busy phase would cross the threshold; park while the loop is idle.
    case deadline
    /// The loop signals on every transition; a stall is N consecutive timed-out waits
    /// (`classicConsecutiveTimeouts`). Kept to compare the two in benchmarks.
    case classic
}
