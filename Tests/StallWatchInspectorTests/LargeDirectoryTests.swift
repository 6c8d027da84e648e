// Tests on a directory of 5,000 reports, 1% of them damaged: list and summary finish, warn once per bad file.
import Foundation
import StallWatchTestSupport
import Testing

@testable import StallWatch
@testable import StallWatchCommands
@testable import StallWatchInspector

/// A temporary directory of `count` reports made from the fixtures, with `damaged` files that are not reports.
struct SyntheticReportDirectory {
    let url: URL
    let count: Int
    let damaged: Int

    init(count: Int, damaged: Int) throws {
        // tmpfs when there is one: creating 5,000 files on a busy disk can take longer than reading them.
        let shm = URL(fileURLWithPath: "/dev/shm")
        let base = FileManager.default.isWritableFile(atPath: shm.path) ? shm : FileManager.default.temporaryDirectory
        url = base.appendingPathComponent("sw-many-\(UUID().uuidString)")
        self.count = count
        self.damaged = damaged
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        // Each fixture's JSON cut at its id and start time, so a report is a few concatenations (string
        // replacement in a debug build would take most of the test's time budget).
        let templates = try ReportFixtures.all.map { fixture -> [String] in
            let text = String(decoding: try fixture.report.encodedJSON(), as: UTF8.self)
            let date = ReportDate.string(from: fixture.report.startedAt)
            let idParts = text.components(separatedBy: "\"id\":\"\(fixture.report.id)\"")
            let dateParts = idParts[1].components(separatedBy: "\"startedAt\":\"\(date)\"")
            return [idParts[0], dateParts[0], dateParts[1]]
        }
        let start = ReportFixtures.date("2026-11-01T00:00:00.000Z")
        let stride = count / max(damaged, 1)
        for index in 0..<count {
            let file = url.appendingPathComponent("stall-synthetic-\(index).json")
            if index % stride == 7, index / stride < damaged {
                try Self.damagedFile(index / stride).write(to: file)
                continue
            }
            let parts = templates[index % templates.count]
            let date = ReportDate.string(from: start.addingTimeInterval(Double(index) * 60))
            let text =
                parts[0] + "\"id\":\"synthetic-\(index)\"" + parts[1] + "\"startedAt\":\"\(date)\"" + parts[2]
            try Data(text.utf8).write(to: file)
        }
    }

    /// Truncated, empty, not JSON, foreign JSON, a future schema version.
    static func damagedFile(_ kind: Int) -> Data {
        switch kind % 5 {
        case 0: Data("{\"schemaVersion\": 1, \"id\": \"half".utf8)
        case 1: Data()
        case 2: Data("not json at all".utf8)
        case 3: Data("{\"name\": \"package.json\", \"version\": \"1.0.0\"}".utf8)
        default: Data("{\"schemaVersion\": 99, \"id\": \"future\"}".utf8)
        }
    }

    func remove() { try? FileManager.default.removeItem(at: url) }
}

@Suite(.offPool, .serialized) struct LargeDirectoryTests {
    @Test(.timeLimit(.minutes(3)))
    func listAndSummaryOfFiveThousandReportsFinishAndWarnOncePerDamagedFile() throws {
        let clock = ContinuousClock()
        var made: SyntheticReportDirectory!
        let writing = try clock.measure { made = try SyntheticReportDirectory(count: 5000, damaged: 50) }
        let directory = made!
        defer { directory.remove() }
        var list: (ExitCode, CapturedConsole)!
        let listTime = clock.measure { list = CapturedConsole.run(["reports", "list", directory.url.path]) }
        #expect(list.0 == .ok)
        #expect(list.1.standardOutput.split(separator: "\n").count == 1 + 4950)
        let warnings = list.1.standardError.split(separator: "\n")
        #expect(warnings.count == 50)
        #expect(
            warnings.allSatisfy { $0.hasPrefix("stallwatch: warning: skipping \(directory.url.path)/stall-synthetic-") }
        )
        #expect(warnings.contains { $0.hasSuffix("schemaVersion 99 is newer than this build reads (2)") })
        #expect(warnings.contains { $0.hasSuffix("empty file") })

        var summary: (ExitCode, CapturedConsole)!
        let summaryTime = clock.measure {
            summary = CapturedConsole.run(["reports", "summary", directory.url.path, "--json"])
        }
        #expect(summary.0 == .ok)
        #expect(summary.1.standardError.split(separator: "\n").count == 50)
        let document = try StallReport.makeDecoder().decode(
            StallGroupView.Document.self, from: Data(summary.1.standardOutput.utf8))
        #expect(document.reports == 4950)
        #expect(document.skipped == 50)
        #expect(document.groups.map(\.count).reduce(0, +) == 4950)
        print("5,000 reports: writing \(writing), list \(listTime), summary \(summaryTime)")
    }
}
