import StallWatchTestSupport
// Command-line overrides go through the configuration's own rules: one range per setting, one threshold rule.
import Testing

@testable import StallWatch

@Suite(.offPool) struct ConfigurationOverrideTests {
    @Test func anOverrideIsCheckedByItsSettingsRangeAndNamesTheFlag() throws {
        var configuration = StallWatchConfiguration()
        try configuration.override("sampleIntervalMs", with: "20", flag: "--sample-interval-ms")
        #expect(configuration.sampleIntervalMs == 20)
        let error = try #require(throws: StallWatchError.self) {
            try configuration.override("thresholdMs", with: "5", flag: "--threshold-ms")
        }
        #expect(error.code == .invalidConfiguration)
        #expect(error.message == "--threshold-ms 5: expected an integer from 10 to 600000")
        #expect(configuration.thresholdMs == 250)
    }

    @Test func aThresholdAboveTheHangThresholdRaisesItAndALowerOneLeavesIt() throws {
        var configuration = StallWatchConfiguration()
        try configuration.override("thresholdMs", with: "9000", flag: "--threshold-ms")
        #expect(configuration.hangThresholdMs == 9000)
        try configuration.override("thresholdMs", with: "100", flag: "--threshold-ms")
        #expect(configuration.thresholdMs == 100 && configuration.hangThresholdMs == 9000)
        try configuration.validate(source: "test")
    }

    @Test func choicesAndTextsOverrideAsTheFileWould() throws {
        var configuration = StallWatchConfiguration()
        try configuration.override("strategy", with: "classic", flag: "--strategy")
        try configuration.override("reportDirectory", with: "/tmp/reports", flag: "--report-dir")
        #expect(configuration.strategy == .classic && configuration.reportDirectory == "/tmp/reports")
        #expect(throws: StallWatchError.self) { try configuration.override("strategy", with: "eager", flag: "-s") }
        #expect(throws: StallWatchError.self) { try configuration.override("noSuchKey", with: "1", flag: "-x") }
    }
}
