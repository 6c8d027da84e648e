// Tests that pin the report file format: golden fixtures both ways, and the JSON Schema.
import Foundation
import StallWatchTestSupport
import Testing

@testable import StallWatch

@Suite(.offPool) struct ReportFormatTests {
    static let updating = ReportFixtures.updating

    @Test(arguments: ReportFixtures.all.map(\.name))
    func decodingAVersion1FixtureAndExpandingItAgainReproducesItByteForByte(name: String) throws {
        let url = ReportFixtures.reportsDirectory.appendingPathComponent("\(name).json")
        let original = try Data(contentsOf: url)
        let report = try StallReport.makeDecoder().decode(StallReport.self, from: original)
        #expect(try report.expandedJSON() == original)
    }

    @Test(arguments: ReportFixtures.all)
    func encodingAConstructedReportMatchesItsFixture(name: String, report: StallReport) throws {
        let encoded = try report.expandedJSON()
        if Self.updating {
            let target = ReportFixtures.sourceDirectory.appendingPathComponent("reports/\(name).json")
            try encoded.write(to: target)
        }
        let fixture = try Data(contentsOf: ReportFixtures.reportsDirectory.appendingPathComponent("\(name).json"))
        #expect(String(decoding: encoded, as: UTF8.self) == String(decoding: fixture, as: UTF8.self))
        #expect(try StallReport.makeDecoder().decode(StallReport.self, from: fixture) == report)
    }

    @Test(arguments: ReportFixtures.diagnosed + ReportFixtures.concurrency)
    func diagnosedFixturesRoundTripBothWays(name: String, report: StallReport) throws {
        let url = ReportFixtures.directory.appendingPathComponent("diagnosed/\(name).json")
        if Self.updating {
            try report.expandedJSON().write(
                to: ReportFixtures.sourceDirectory.appendingPathComponent("diagnosed/\(name).json"))
        }
        let fixture = try Data(contentsOf: url)
        #expect(try report.expandedJSON() == fixture)
        #expect(try StallReport.makeDecoder().decode(StallReport.self, from: fixture) == report)
    }

    @Test func datesAreUTCWithMillisecondsAndRoundTripExactly() throws {
        let date = try #require(ReportDate.date(from: "2026-11-30T22:15:00.123Z"))
        #expect(ReportDate.string(from: date) == "2026-11-30T22:15:00.123Z")
        #expect(ReportDate.date(from: "2026-11-30T23:15:00.123+01:00") == date)
        #expect(ReportDate.string(from: Date(timeIntervalSince1970: 0.0006)) == "1970-01-01T00:00:00.001Z")
        #expect(ReportDate.date(from: "2026-11-30 22:15:00Z") == nil)
        #expect(ReportDate.date(from: "2026-11-30T22:15:00.123") == nil)
    }

    /// Whether `python3 -c 'import jsonschema'` works here.
    static let jsonschemaAvailable: Bool = {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", "import jsonschema"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return false }
        process.waitUntilExit()
        return process.terminationStatus == 0
    }()
    /// What a test that validates says when `jsonschema` is missing.
    static let jsonschemaMissing: Comment =
        "python3 cannot import jsonschema (the PyPI package scripts/bootstrap.sh installs for the tests)"

    @Test func everyFixtureValidatesAgainstTheSchemaOfItsVersion() throws {
        try #require(Self.jsonschemaAvailable, Self.jsonschemaMissing)
        let root = ReportFixtures.repositoryRoot
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [
            "python3", root.appendingPathComponent("scripts/validate-reports.py").path,
            ReportFixtures.reportsDirectory.path, ReportFixtures.directory.appendingPathComponent("diagnosed").path,
            ReportFixtures.directory.appendingPathComponent("reports-v2").path,
        ]
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        let message = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "\(message)")
    }

    @Test(arguments: [1, 2])
    func theSchemaOfEachVersionRejectsUnknownKeysAndBadHex(version: Int) throws {
        try #require(Self.jsonschemaAvailable, Self.jsonschemaMissing)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("sw-schema-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let report = ReportFixtures.endedStall
        let encoded = version == 1 ? try report.expandedJSON() : try report.encodedJSON()
        // Written as text: the model holds addresses as integers and always encodes them with "0x".
        let good = String(decoding: encoded, as: UTF8.self)
        try #require(good.contains("\"schemaVersion\"\(version == 1 ? " : " : ":")\(version)"))
        let address = report.samples[0].frames[0].address.hexAddress
        try #require(good.contains("\"\(address)\""))
        let bad = good.replacingOccurrences(of: "\"\(address)\"", with: "\"\(address.dropFirst(2))\"")
        try Data(bad.utf8).write(to: directory.appendingPathComponent("bad-hex.json"))
        var object = try #require(try JSONSerialization.jsonObject(with: encoded) as? [String: Any])
        object["unexpected"] = true
        try JSONSerialization.data(withJSONObject: object).write(to: directory.appendingPathComponent("extra-key.json"))
        try Data(good.utf8).write(to: directory.appendingPathComponent("good.json"))
        let root = ReportFixtures.repositoryRoot
        for (name, status) in [("good.json", 0), ("bad-hex.json", 1), ("extra-key.json", 1)] {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = [
                "python3", root.appendingPathComponent("scripts/validate-reports.py").path,
                directory.appendingPathComponent(name).path,
            ]
            process.standardError = FileHandle.nullDevice
            process.standardOutput = FileHandle.nullDevice
            try process.run()
            process.waitUntilExit()
            #expect(process.terminationStatus == Int32(status), "version \(version): \(name)")
        }
    }
}
