// Tests of ReportStore: tolerant enumeration with one warning per bad file, and lookup by id.
import Foundation
import StallWatchTestSupport
import Testing

@testable import StallWatch

@Suite(.offPool) struct ReportStoreTests {
    @Test func listsOnlyGoodReportsWithOneWarningPerBadFile() throws {
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        let writer = ReportWriter(directory: scratch.path)
        try writer.write(ReportSamples.report(id: "good-1", startedAt: Date(timeIntervalSince1970: 1_000)))
        try writer.write(ReportSamples.report(id: "good-2", startedAt: Date(timeIntervalSince1970: 2_000)))
        let valid = try ReportSamples.report(id: "x").encodedJSON()
        var future = try #require(try JSONSerialization.jsonObject(with: valid) as? [String: Any])
        future["schemaVersion"] = 99
        let bad: [String: Data] = [
            "truncated.json": valid.prefix(valid.count / 2),
            "corrupt.json": Data("{\"schemaVersion\": 1, \"id\": }".utf8),
            "binary.json": Data([0x00, 0xff, 0x13, 0x37]),
            "empty.json": Data(),
            "foreign.json": Data("{\"name\": \"package\", \"version\": \"1.0\"}".utf8),
            "array.json": Data("[1, 2, 3]".utf8),
            "future.json": try JSONSerialization.data(withJSONObject: future),
            "incomplete.json": Data("{\"schemaVersion\": 1, \"id\": \"x\"}".utf8),
        ]
        for (name, data) in bad { try data.write(to: URL(fileURLWithPath: scratch.file(name))) }
        _ = FileManager.default.createFile(atPath: scratch.file("readme.txt"), contents: Data("ignored".utf8))
        _ = FileManager.default.createFile(
            atPath: scratch.file(".stall-x.json.tmp-1-2"), contents: Data("ignored".utf8))

        var problems: [ReportStore.Problem] = []
        let entries = try ReportStore(directory: scratch.path).reports { problems.append($0) }

        #expect(entries.map(\.report.id) == ["good-2", "good-1"])
        #expect(problems.count == bad.count)
        #expect(Set(problems.map { ($0.path as NSString).lastPathComponent }) == Set(bad.keys))
        let reasons = Dictionary(
            uniqueKeysWithValues: problems.map { (($0.path as NSString).lastPathComponent, $0.reason) })
        #expect(reasons["truncated.json"]?.hasPrefix("truncated JSON") == true)
        #expect(reasons["corrupt.json"] == "invalid JSON")
        #expect(reasons["binary.json"] == "not JSON")
        #expect(reasons["empty.json"] == "empty file")
        #expect(reasons["foreign.json"]?.contains("not a StallWatch report") == true)
        #expect(reasons["array.json"]?.contains("not a StallWatch report") == true)
        #expect(reasons["future.json"] == "schemaVersion 99 is newer than this build reads (2)")
        #expect(reasons["incomplete.json"]?.hasPrefix("not a valid report: missing") == true)
        #expect(problems.allSatisfy { !$0.description.contains("\n") })
    }

    @Test func findsAReportByIdOrUniquePrefix() throws {
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        let writer = ReportWriter(directory: scratch.path)
        for id in ["20261130T221500.123Z-1-1", "20261130T221500.123Z-1-2", "20261201T000000.000Z-1-3"] {
            try writer.write(ReportSamples.report(id: id))
        }
        // A report renamed by hand is still found by its id.
        try FileManager.default.moveItem(
            atPath: scratch.file("stall-20261201T000000.000Z-1-3.json"), toPath: scratch.file("saved.json"))
        let store = ReportStore(directory: scratch.path)
        guard case .found(let exact) = try store.lookup(id: "20261130T221500.123Z-1-2") else { Issue.record(); return }
        #expect(exact.report.id == "20261130T221500.123Z-1-2")
        guard case .found(let renamed) = try store.lookup(id: "20261201") else { Issue.record(); return }
        #expect(renamed.path == scratch.file("saved.json"))
        guard case .ambiguous(let ids) = try store.lookup(id: "20261130") else { Issue.record(); return }
        #expect(ids == ["20261130T221500.123Z-1-1", "20261130T221500.123Z-1-2"])
        guard case .notFound = try store.lookup(id: "1999") else { Issue.record(); return }
    }

    @Test func listingDecodeKeepsTheHeaderAndFirstStackAndSkipsTheHeavyParts() throws {
        var report = ReportSamples.report(id: "20261130T221500.123Z-1-1")
        let a = StackFrame(address: 0x10, image: "/bin/a", offset: 0x10, symbol: "a")
        let b = StackFrame(address: 0x20, image: "/bin/a", offset: 0x20, symbol: "b")
        report.samples = [
            .init(offsetMs: 250, frames: [], error: "timed out"), .init(offsetMs: 300, frames: [a, b]),
            .init(offsetMs: 350, frames: [b, a]),
        ]
        report.threads = [.init(threadId: 7, name: "worker", state: "S", frames: [a])]
        report.callTree = CallTree(samples: report.samples).roots
        report.cause = .init(kind: .lock, evidence: ["held"], blockingThreadId: 7)
        let data = try report.encodedJSON()

        // Dates round to milliseconds on disk: compare what is written.
        let full = try ReportStore.decode(data).get()
        #expect(try full.encodedJSON() == data)

        // Version 2 (what this build writes): the head only, with the top frame.
        let listed = try ReportStore.decode(data, listing: true).get()
        #expect(listed.samples.count == 3)
        #expect(listed.samples.map(\.offsetMs) == [250, 300, 350])
        #expect(listed.applicationFrame == report.applicationFrame)
        #expect(listed.threads == nil && listed.callTree == nil && listed.images.isEmpty)
        #expect(listed.cause?.kind == report.cause?.kind)
        #expect(listed.id == report.id && listed.durationMs == report.durationMs)

        // Version 1: the first stack with frames, whole.
        let old = try ReportStore.decode(report.expandedJSON(), listing: true).get()
        #expect(old.samples.map(\.offsetMs) == [250, 300, 350])
        #expect(old.samples[1].frames == [a, b])
        #expect(old.samples[2].frames.isEmpty)
        #expect(old.threads == nil && old.callTree == nil && old.images.isEmpty)
        #expect(old.cause == report.cause)
    }

    @Test func aMissingDirectoryIsAnErrorNamingIt() {
        let error = #expect(throws: StallWatchError.self) {
            try ReportStore(directory: "/nonexistent/stallwatch").forEachReport(onProblem: { _ in }) { _ in }
        }
        #expect(error?.errno == ENOENT)
        #expect(error?.context["path"] == "/nonexistent/stallwatch")
    }
}
