// Report schema version 2: golden files both ways, one model for both versions, the frame table, the head.
import Foundation
import StallWatchTestSupport
import Testing

@testable import StallWatch
@testable import StallWatchInspector

@Suite(.offPool) struct ReportVersion2Tests {
    static var fixtures: [(name: String, report: StallReport)] {
        ReportFixtures.all + ReportFixtures.diagnosed + ReportFixtures.concurrency
    }

    static func version2File(_ name: String) -> URL {
        ReportFixtures.directory.appendingPathComponent("reports-v2/\(name).json")
    }

    static func version1File(_ name: String) -> URL {
        let diagnosed = (ReportFixtures.diagnosed + ReportFixtures.concurrency).contains { $0.name == name }
        return ReportFixtures.directory.appendingPathComponent("\(diagnosed ? "diagnosed" : "reports")/\(name).json")
    }

    @Test(arguments: fixtures)
    func encodingAReportGivesItsVersion2GoldenFileAndDecodingTheFileGivesTheReport(
        name: String, report: StallReport
    ) throws {
        let encoded = try report.encodedJSON()
        if ReportFormatTests.updating {
            try encoded.write(to: ReportFixtures.sourceDirectory.appendingPathComponent("reports-v2/\(name).json"))
        }
        let golden = try Data(contentsOf: Self.version2File(name))
        #expect(String(decoding: encoded, as: UTF8.self) == String(decoding: golden, as: UTF8.self))
        #expect(try StallReport.makeDecoder().decode(StallReport.self, from: golden) == report)
        #expect(try ReportStore.decode(golden).get().encodedJSON() == golden)
    }

    @Test(arguments: fixtures.map(\.name))
    func aVersion1FileAndItsVersion2FileDecodeToTheSameReport(name: String) throws {
        let version1 = try ReportStore.decode(Data(contentsOf: Self.version1File(name))).get()
        let version2 = try ReportStore.decode(Data(contentsOf: Self.version2File(name))).get()
        #expect(version1 == version2)
        #expect(version2.schemaVersion == StallReport.currentSchemaVersion)
        // The expanded form of the version 2 file is the version 1 file, byte for byte.
        #expect(try version2.expandedJSON() == Data(contentsOf: Self.version1File(name)))
    }

    @Test func version2FilesAreCompactAndWriteEachDistinctFrameOnce() throws {
        let report = ReportFixtures.diagnosedLock
        let data = try report.encodedJSON()
        let text = String(decoding: data, as: UTF8.self)
        #expect(text.hasPrefix("{\"schemaVersion\":2,\"head\":{"))
        #expect(text.filter { $0 == "\n" }.count == 1 && text.hasSuffix("}\n"))
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let table = try #require(object["frames"] as? [[String: Any]])
        var distinct = Set<StackFrame>()
        for sample in report.samples { distinct.formUnion(sample.frames) }
        for thread in report.threads ?? [] { distinct.formUnion(thread.frames) }
        distinct.formUnion(report.pointStack?.frames ?? [])
        #expect(table.count == distinct.count)
        let samples = try #require(object["samples"] as? [[String: Any]])
        #expect(samples.allSatisfy { $0["frames"] is [Int] })
        #expect(try data.count < report.expandedJSON().count / 2)
    }

    @Test(arguments: fixtures)
    func listingReadsOnlyTheHeadAndSummarizesAsTheWholeReportDoes(name: String, report: StallReport) throws {
        let data = try report.encodedJSON()
        let listed = try ReportStore.decode(data, listing: true).get()
        #expect(ReportSummary(path: "x", report: listed) == ReportSummary(path: "x", report: report))
        #expect(listed.applicationFrame == report.applicationFrame)
        #expect(listed.samples.map(\.offsetMs) == report.samples.map(\.offsetMs))
        #expect(listed.cause?.kind == report.cause?.kind && listed.loop == report.loop)
        #expect(listed.endedAt == report.endedAt)
        #expect(listed.threads == nil && listed.callTree == nil && listed.images.isEmpty)
        // The head alone (what a listing reads of a file) is a complete document.
        let end = try #require(String(decoding: data, as: UTF8.self).range(of: ",\"frames\":"))
        let prefix = String(decoding: data, as: UTF8.self)[..<end.lowerBound] + "}"
        let fromHead = try ReportStore.decode(Data(prefix.utf8), listing: true).get()
        #expect(ReportSummary(path: "x", report: fromHead) == ReportSummary(path: "x", report: report))
    }

    @Test func aDirectoryListingReadsHeadsLongerThanTheFirstReadAndLargeReports() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("sw-v2-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        var long = ReportFixtures.diagnosedLock
        long.id = "20261130T221500.123Z-4242-90"
        long.notes = (0..<400).map { "note \($0): \(String(repeating: "{[\"\\", count: 20))" }
        var large = ReportFixtures.endedStall
        large.id = "20261130T221500.123Z-4242-91"
        large.samples = (0..<400).map { index in
            .init(offsetMs: Double(index), frames: (0..<60).map { StackFrame(address: UInt64(index * 64 + $0)) })
        }
        for report in [long, large] {
            try report.encodedJSON().write(to: directory.appendingPathComponent("stall-\(report.id).json"))
        }
        var listed: [String: StallReport] = [:]
        try ReportStore(directory: directory.path).forEachReport(listing: true, onProblem: { Issue.record("\($0)") }) {
            listed[$0.report.id] = $0.report
        }
        #expect(listed[long.id]?.cause?.kind == long.cause?.kind)
        #expect(listed[large.id]?.samples.count == 400)
        #expect(listed[large.id]?.applicationFrame == large.applicationFrame)
    }

    @Test func aFrameIndexOutsideTheTableIsABadValueNamingWhere() throws {
        let text = String(decoding: try ReportFixtures.endedStall.encodedJSON(), as: UTF8.self)
        let broken = text.replacingOccurrences(of: "\"frames\":[0,", with: "\"frames\":[99,")
        try #require(broken != text)
        guard case .failure(let failure) = ReportStore.decode(Data(broken.utf8)) else {
            Issue.record("decoded a report whose stack names frame 99")
            return
        }
        #expect(failure.message.contains("frame index 99"))
    }

    @Test func showJSONPrintsEveryVersionExpandedWithFramesInline() throws {
        for name in ["lock-diagnosed", "stall-ended"] {
            for file in [Self.version1File(name), Self.version2File(name)] {
                let (code, output) = CapturedConsole.run(["reports", "show", file.path, "--json"])
                #expect(code == .ok)
                #expect(Data(output.standardOutput.utf8) == (try Data(contentsOf: Self.version1File(name))))
            }
        }
    }

    @Test func showByIdReadsTheFilesNamedForTheIdBeforeAnyOther() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("sw-v2-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let report = ReportFixtures.diagnosedLock
        try report.encodedJSON().write(to: directory.appendingPathComponent("stall-\(report.id).json"))
        // A renamed copy with an id of the same prefix: a lookup that decoded every file would find two.
        var other = report
        other.id = report.id + "0"
        try other.encodedJSON().write(to: directory.appendingPathComponent("saved.json"))
        let prefix = String(report.id.prefix(22))
        let store = ReportStore(directory: directory.path)
        guard case .found(let entry) = try store.lookup(id: prefix) else {
            Issue.record("no report found for \(prefix)")
            return
        }
        #expect(entry.report == report)
        let (code, output) = CapturedConsole.run(["reports", "show", prefix, "--dir", directory.path])
        #expect(code == .ok && output.standardOutput.contains(report.id) && output.standardError.isEmpty)
    }
}
