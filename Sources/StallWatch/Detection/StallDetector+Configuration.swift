// The detector's settings from a StallWatchConfiguration, and the detector's rules that others ask about.

extension StallWatchConfiguration {
    /// The detector settings these values describe.
    package var detectorConfiguration: StallDetector.Configuration {
        let times = intervals
        return StallDetector.Configuration(
            thresholdNanos: times.threshold, hangThresholdNanos: times.hangThreshold,
            lateWakeupToleranceNanos: times.lateWakeupTolerance, strategy: detectorStrategy)
    }

    private var detectorStrategy: StallDetector.Strategy {
        switch strategy {
        case .deadline: .deadline
        case .classic: .classic(consecutiveTimeouts: classicConsecutiveTimeouts)
        }
    }
}

extension StallDetector.Configuration {
    /// Whether a phase busy for `busyNanos` has crossed the threshold: the detector's own rule, for those that
    /// must judge without running it (the watchdog's health verdict, the pool's saturation, a job a pool worker
    /// timed itself).
    func isStall(busyNanos: UInt64) -> Bool { busyNanos >= thresholdNanos }

    /// Whether a stall that lasted `durationNanos` is a hang (the report's severity).
    func isHang(durationNanos: UInt64) -> Bool { durationNanos >= hangThresholdNanos }
}
