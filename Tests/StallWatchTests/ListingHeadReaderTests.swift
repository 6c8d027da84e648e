// Tests of the hand-written listing reader: the same listing as JSONDecoder's, or a fallback to it.
import Foundation
import StallWatchTestSupport
import Testing

@testable import StallWatch

@Suite(.offPool) struct ListingHeadReaderTests {
    /// A report with every member a listing reads, the optional ones set.
    static func fullReport() -> StallReport {
        var report = ReportSamples.report(id: "20261201T000000.000Z-7-1")
        report.cause = .init(kind: .lock, evidence: ["futex wait on 0x7f00"], blockingThreadId: 9)
        report.occurrences = 3
        report.firstSeen = report.startedAt
        report.lastSeen = report.startedAt.addingTimeInterval(12.5)
        report.maxDurationMs = 812.25
        report.totalDurationMs = 1400.5
        report.startedBeforeAttach = true
        report.notes = ["a note with \"quotes\" and a \\ backslash"]
        report.annotations = ["request": "GET /x?a=1&b=\u{e9}"]
        report.samples.append(.init(offsetMs: 301.5, frames: []))
        report.samples[0].frames = [
            StackFrame(
                address: 0x55d0_0000_1234, image: "/usr/bin/demo", offset: 0x1234, symbol: "demo.stall() -> ()",
                symbolOffset: 17, file: "/src/Stall.swift", line: 42, shortSymbol: "stall()")
        ]
        return report
    }

    /// Both readers on the head of `report`'s version 2 file.
    static func bothListings(of report: StallReport) throws -> (fast: StallReport?, decoded: StallReport) {
        let data = try report.encodedJSON()
        let head = try #require(ReportHeadPrefix.headDocument(data))
        let fast = head.withUnsafeBytes(ListingHeadReader.listingHead).map { StallReport(listingHead: $0) }
        let decoded = try ReportStore.decode(head, listing: true).get()
        return (fast, decoded)
    }

    @Test func readsWhatJSONDecoderReadsFromAFullHead() throws {
        let (fast, decoded) = try Self.bothListings(of: Self.fullReport())
        let listing = try #require(fast, "the encoder's own output takes the fast path")
        #expect(listing == decoded)
        #expect(listing.cause?.kind == .lock)
        #expect(listing.occurrences == 3)
        #expect(listing.samples.count == 2)
        #expect(listing.samples.first?.frames.first?.line == 42)
    }

    @Test func readsAMinimalHeadWithTheOptionalMembersAbsent() throws {
        let report = ReportSamples.report(id: "20261201T000000.000Z-7-2", status: .ongoing)
        let (fast, decoded) = try Self.bothListings(of: report)
        #expect(try #require(fast) == decoded)
        #expect(decoded.endedAt == nil && decoded.cause == nil)
    }

    @Test func aStringWithAnEscapeIsLeftToJSONDecoder() throws {
        var report = Self.fullReport()
        report.loop.name = "loop \"main\"\n"
        let (fast, decoded) = try Self.bothListings(of: report)
        #expect(fast == nil)
        #expect(decoded.loop.name == "loop \"main\"\n")
    }

    @Test func malformedOrForeignHeadsGiveNil() {
        let cases = [
            #"{"schemaVersion":2,"head":{"id":"x"}}"#,  // members missing
            #"{"schemaVersion":2,"head":{"id":1}}"#,  // wrong type
            #"{"schemaVersion":2,"head":{"status":"sleeping"}}"#,  // unknown enum value
            #"{"schemaVersion":2,"head":{"id":"x""#,  // truncated
            #"{"schemaVersion":1,"id":"x"}"#,  // not version 2
        ]
        for text in cases {
            let bytes = Array(text.utf8)
            #expect(bytes.withUnsafeBytes(ListingHeadReader.listingHead) == nil, "\(text)")
        }
    }

    @Test func aDirectoryListingTakesTheSameReportsEitherWay() throws {
        let directory = Fixtures.temporaryDirectory("listing-reader")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var escaped = Self.fullReport()
        escaped.id = "20261201T000000.000Z-7-3"
        escaped.signature = "sig\twith tab"
        let reports = [Self.fullReport(), escaped]
        for report in reports {
            try report.encodedJSON().write(
                to: URL(fileURLWithPath: directory + "/" + ReportWriter.fileName(forReportID: report.id)))
        }
        var listed: [String: StallReport] = [:]
        try ReportStore(directory: directory).forEachReport(listing: true, onProblem: { _ in }) {
            listed[$0.report.id] = $0.report
        }
        #expect(listed.count == 2)
        for report in reports {
            let head = try #require(ReportHeadPrefix.headDocument(try report.encodedJSON()))
            #expect(listed[report.id] == (try ReportStore.decode(head, listing: true).get()))
        }
    }
}
