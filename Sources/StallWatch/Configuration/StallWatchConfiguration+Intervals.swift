// The configuration's times, decoded once from the settings' milliseconds into nanoseconds.

extension StallWatchConfiguration {
    /// The times the settings give, in nanoseconds (``Duration/nanoseconds`` and System/Time.swift say why): what
    /// every watcher, sampler and recorder reads, so that a millisecond setting is turned into nanoseconds here
    /// and nowhere else. Which busy phase is a stall, and which stall a hang, only the detector judges
    /// (``StallDetector/Configuration``), from these.
    package struct Intervals: Sendable, Equatable {
        /// `thresholdMs`.
        var threshold: UInt64
        /// `hangThresholdMs`.
        var hangThreshold: UInt64
        /// `lateWakeupToleranceMs`.
        var lateWakeupTolerance: UInt64
        /// `sampleIntervalMs`.
        var sampleInterval: UInt64
        /// `captureTimeoutMs`.
        package var captureTimeout: UInt64
        /// `dedupWindowMs`.
        var dedupWindow: UInt64
    }

    /// The settings' times in nanoseconds.
    package var intervals: Intervals {
        func nanos(_ milliseconds: Int) -> UInt64 { UInt64(max(0, milliseconds)) * 1_000_000 }
        return Intervals(
            threshold: nanos(thresholdMs), hangThreshold: nanos(hangThresholdMs),
            lateWakeupTolerance: nanos(lateWakeupToleranceMs), sampleInterval: nanos(sampleIntervalMs),
            captureTimeout: nanos(captureTimeoutMs), dedupWindow: nanos(dedupWindowMs))
    }
}
