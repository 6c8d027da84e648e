import StallWatchTestSupport
// One time representation (nanoseconds), decoded once from the settings; one judge of the thresholds.
import Testing

@testable import StallWatch

@Suite(.offPool) struct TimeAndThresholdTests {
    @Test func durationsBecomeNanosecondsClampedToTheUnsignedRange() {
        #expect(Duration.milliseconds(250).nanoseconds == 250_000_000)
        #expect(Duration.microseconds(1).nanoseconds == 1000)
        #expect(Duration.seconds(-1).nanoseconds == 0)
        #expect(Duration.nanoseconds(-5).nanoseconds == 0)
        #expect(Duration.seconds(Int64.max).nanoseconds == UInt64.max)
    }

    @Test func theSettingsTimesAreDecodedOnceIntoNanoseconds() {
        var configuration = StallWatchConfiguration()
        configuration.thresholdMs = 120
        configuration.sampleIntervalMs = 7
        let intervals = configuration.intervals
        #expect(intervals.threshold == 120_000_000 && intervals.sampleInterval == 7_000_000)
        #expect(intervals.captureTimeout == 100_000_000 && intervals.dedupWindow == 600_000_000_000)
        #expect(configuration.detectorConfiguration.thresholdNanos == intervals.threshold)
        #expect(configuration.detectorConfiguration.hangThresholdNanos == intervals.hangThreshold)
    }

    @Test func theDetectorsRulesMarkTheThresholdsThemselvesAsCrossed() {
        let detector = StallDetector.Configuration(thresholdNanos: 100, hangThresholdNanos: 1000)
        #expect(!detector.isStall(busyNanos: 99) && detector.isStall(busyNanos: 100))
        #expect(!detector.isHang(durationNanos: 999) && detector.isHang(durationNanos: 1000))
    }

    @Test func reportsRoundTheirUnitsToTwoDecimals() {
        #expect(StallReport.milliseconds(250_000_000) == 250)
        #expect(StallReport.milliseconds(1_234_567) == 1.23)
        #expect(StallReport.microseconds(31_456) == 31.46)
        #expect(describeNanoseconds(100_000_000) == "100 ms" && describeNanoseconds(1_500_000_000) == "1.5 s")
    }
}
