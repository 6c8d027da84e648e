// The detector settings a StallWatchConfiguration describes.

extension StallWatchConfiguration {
    /// The detector settings these values describe.
    public var detectorConfiguration: StallDetector.Configuration {
        StallDetector.Configuration(
            thresholdNanos: UInt64(thresholdMs) * 1_000_000, hangThresholdNanos: UInt64(hangThresholdMs) * 1_000_000,
            lateWakeupToleranceNanos: UInt64(lateWakeupToleranceMs) * 1_000_000,
            strategy: detectorStrategy)
    }

    private var detectorStrategy: StallDetector.Strategy {
        switch strategy {
        case .deadline: .deadline
        case .classic: .classic(consecutiveTimeouts: classicConsecutiveTimeouts)
        }
    }
}
