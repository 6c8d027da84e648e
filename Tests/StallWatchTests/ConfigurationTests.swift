// Configuration: defaults match Config/, files and environment override them, bad values are named.
import Foundation
import StallWatchTestSupport
import Testing

@testable import StallWatch

@Suite(.offPool) struct ConfigurationTests {
    static let configDirectory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Config")

    func temporaryFile(_ text: String) throws -> String {
        let path = NSTemporaryDirectory() + "stallwatch-config-\(UUID().uuidString).json"
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    @Test func shippedDefaultsFileEqualsTheBuiltInDefaults() throws {
        let path = Self.configDirectory.appendingPathComponent("stallwatch.json").path
        let loaded = try StallWatchConfiguration.load(file: path, environment: [:])
        #expect(loaded == StallWatchConfiguration())
    }

    @Test func schemaDescribesExactlyTheKeysWithTheirDefaults() throws {
        let data = try Data(contentsOf: Self.configDirectory.appendingPathComponent("stallwatch.schema.json"))
        let schema = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let properties = try #require(schema["properties"] as? [String: [String: Any]])
        let defaults = StallWatchConfiguration().jsonObject
        #expect(Set(properties.keys.filter { $0 != "$schema" }) == Set(defaults.keys))
        for (key, value) in defaults {
            let schemaDefault = properties[key]?["default"] as? NSObject
            #expect(schemaDefault?.isEqual(value) == true, "default of \(key)")
        }
    }

    @Test func environmentOverridesTheFile() throws {
        let path = try temporaryFile(#"{"thresholdMs": 400, "symbolication": "fast"}"#)
        defer { unlink(path) }
        let config = try StallWatchConfiguration.load(
            file: path, environment: ["STALLWATCH_THRESHOLD_MS": "300", "STALLWATCH_MAX_SAMPLES": "7"])
        #expect(config.thresholdMs == 300)
        #expect(config.maxSamples == 7)
        #expect(config.symbolication == .fast)
    }

    @Test(arguments: [
        (#"{"thresholdMs": 5}"#, "thresholdMs = 5 is invalid; expected an integer from 10 to 600000"),
        (#"{"thresholdMs": "fast"}"#, "thresholdMs = \"fast\" is invalid"),
        (#"{"thresholdMs": 250.5}"#, "thresholdMs = 250.5 is invalid"),
        (#"{"symbolication": "all"}"#, #"expected one of "full", "fast", "off""#),
        (#"{"strategy": "eager"}"#, #"strategy = eager is invalid; expected one of "deadline", "classic""#),
        (#"{"enabled": 1}"#, "enabled = 1 is invalid; expected true or false"),
        (#"{"treshold": 1}"#, #"unknown key "treshold""#),
        (#"[1, 2]"#, "expected a JSON object of settings"),
        (#"{"thresholdMs": 900, "hangThresholdMs": 500}"#, "hangThresholdMs 500 is below thresholdMs 900"),
    ])
    func invalidFileValuesAreRejectedNamingFileKeyAndValue(text: String, expected: String) throws {
        let path = try temporaryFile(text)
        defer { unlink(path) }
        let error = #expect(throws: StallWatchError.self) {
            try StallWatchConfiguration.load(file: path, environment: [:])
        }
        #expect(error?.code == .invalidConfiguration)
        #expect(error?.message.contains(expected) == true, "\(error?.message ?? "")")
        if !text.contains("hangThresholdMs") { #expect(error?.message.hasPrefix(path) == true) }
    }

    @Test func invalidEnvironmentValueNamesTheVariable() {
        let error = #expect(throws: StallWatchError.self) {
            try StallWatchConfiguration.load(environment: ["STALLWATCH_SAMPLE_INTERVAL_MS": "0"])
        }
        #expect(
            error?.message
                == "environment variable STALLWATCH_SAMPLE_INTERVAL_MS: sampleIntervalMs = 0 is invalid; expected an integer from 1 to 60000"
        )
        #expect(error?.context["key"] == "sampleIntervalMs")
    }

    @Test func choicesAreEnumsReadFromTheirStrings() throws {
        let config = try StallWatchConfiguration.load(
            environment: ["STALLWATCH_STRATEGY": "classic", "STALLWATCH_SYMBOLICATION": " off "])
        #expect(config.strategy == .classic)
        #expect(config.symbolication == .off)
        #expect(config.detectorConfiguration.strategy == .classic(consecutiveTimeouts: 5))
        #expect(config.jsonObject["strategy"] as? String == "classic")
        let error = #expect(throws: StallWatchError.self) {
            try StallWatchConfiguration.load(environment: ["STALLWATCH_SYMBOLICATION": "some"])
        }
        #expect(
            error?.message
                == #"environment variable STALLWATCH_SYMBOLICATION: symbolication = some is invalid; expected one of "full", "fast", "off""#
        )
    }

    @Test func emptyDirectoriesResolveToTheDefaults() {
        var config = StallWatchConfiguration()
        #expect(config.heartbeatDirectoryPath == "/dev/shm")
        #expect(config.reportDirectoryPath == StallWatchConfiguration.defaultReportDirectory())
        #expect(
            StallWatchConfiguration.defaultReportDirectory(environment: ["STALLWATCH_REPORT_DIRECTORY": "/srv/r"])
                == "/srv/r")
        #expect(StallWatchConfiguration.defaultReportDirectory(environment: [:]) == "/var/tmp/stallwatch-\(geteuid())")
        config.reportDirectory = "/srv/reports"
        config.heartbeatDirectory = "/run/hb"
        #expect(config.reportDirectoryPath == "/srv/reports")
        #expect(config.heartbeatDirectoryPath == "/run/hb")
    }

    @Test func missingFileIsAClearError() {
        let error = #expect(throws: StallWatchError.self) {
            try StallWatchConfiguration.load(file: "/nonexistent/stallwatch.json", environment: [:])
        }
        #expect(error?.message.hasPrefix("/nonexistent/stallwatch.json: cannot read") == true)
    }

    @Test func missingDefaultFileGivesDefaultsAndEnvironment() throws {
        let config = try StallWatchConfiguration.load(
            fileIfPresent: "/nonexistent/stallwatch.json", environment: ["STALLWATCH_THRESHOLD_MS": "300"])
        var expected = StallWatchConfiguration()
        expected.thresholdMs = 300
        #expect(config == expected)
    }

    @Test func presentDefaultFileIsStillValidated() throws {
        let path = try temporaryFile(#"{"treshold": 1}"#)
        defer { unlink(path) }
        let error = #expect(throws: StallWatchError.self) {
            try StallWatchConfiguration.load(fileIfPresent: path, environment: [:])
        }
        #expect(error?.message.contains(#"unknown key "treshold""#) == true)
    }
}
