// Publishing final reports: a repeat is folded into the report kept in memory, never one read back from disk.
import Foundation
import StallWatchTestSupport
import Testing

@testable import StallWatch

@Suite(.offPool) struct StallPublisherTests {
    static let second: UInt64 = 1_000_000_000

    static func publisher(in directory: ScratchDirectory) -> StallPublisher {
        var configuration = StallWatchConfiguration()
        configuration.reportDirectory = directory.path
        return StallPublisher(configuration: configuration, emit: { _ in })
    }

    /// A final report as the builder makes it (one occurrence).
    static func report(id: String, status: StallReport.Status = .ended, startedAt: Date? = nil) -> StallReport {
        var report =
            startedAt.map { ReportSamples.report(id: id, status: status, startedAt: $0) }
            ?? ReportSamples.report(id: id, status: status)
        report.occurrences = 1
        return report
    }

    @Test func aRepeatIsFoldedIntoTheReportKeptInMemory() throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        var publisher = Self.publisher(in: directory)
        let first = Self.report(id: "r1")
        _ = publisher.publishFinal(first, now: 0)
        // Whatever is on disk now is not read back: the fold rewrites the report from memory.
        let firstPath = directory.file(ReportWriter.fileName(forReportID: "r1"))
        try Data("not a report".utf8).write(to: URL(fileURLWithPath: firstPath))

        let repeatStart = first.startedAt.addingTimeInterval(30)
        let repeated = Self.report(id: "r2", status: .ongoing, startedAt: repeatStart)
        publisher.publishProvisional(repeated)
        #expect(try directory.names().count == 2)
        let folded = publisher.publishFinal(Self.report(id: "r2", startedAt: repeatStart), now: 30 * Self.second)

        #expect(folded.occurrences == 2)
        #expect(try directory.names() == [ReportWriter.fileName(forReportID: "r1")])
        let onDisk = try ReportStore.load(path: firstPath)
        #expect(onDisk.id == "r1")
        #expect(onDisk.occurrences == 2)
        #expect(onDisk.firstSeen == first.startedAt)
        #expect(onDisk.lastSeen == repeatStart)
        #expect(onDisk.samples == first.samples)
    }

    @Test func aFoldWhoseReportFileIsGoneWritesThisStallInstead() throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        var publisher = Self.publisher(in: directory)
        _ = publisher.publishFinal(Self.report(id: "r1"), now: 0)
        unlink(directory.file(ReportWriter.fileName(forReportID: "r1")))

        _ = publisher.publishFinal(Self.report(id: "r2"), now: Self.second)
        #expect(try directory.names() == [ReportWriter.fileName(forReportID: "r2")])
        let written = try ReportStore.load(path: directory.file(ReportWriter.fileName(forReportID: "r2")))
        #expect(written.occurrences == 1)
    }

    @Test func aRepeatAfterTheWindowGetsAFileOfItsOwn() throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        var publisher = Self.publisher(in: directory)
        _ = publisher.publishFinal(Self.report(id: "r1"), now: 0)
        let later = publisher.publishFinal(Self.report(id: "r2"), now: 3_600 * Self.second)
        #expect(later.occurrences == 1)
        #expect(try directory.names().count == 2)
    }

    /// A report of the same signature whose samples are the stacks given (innermost first, functions of the demo
    /// image, each at an offset of its own).
    static func report(id: String, stacks: [[String]]) -> StallReport {
        var report = Self.report(id: id)
        report.samples = stacks.enumerated().map { index, names in
            .init(
                offsetMs: 251 + Double(index) * 50,
                frames: names.map { name in
                    let offset = 0x1000 + (name.utf8.reduce(UInt64(0)) { $0 &* 31 &+ UInt64($1) } & 0xf_ffff) * 0x10
                    return StackFrame(
                        address: offset, image: "/usr/bin/demo", offset: offset, symbol: name, symbolOffset: 0)
                })
        }
        return report
    }

    /// A repeat of a disk stall (the same top frame at first) whose samples then wait under another caller: in three
    /// of eight samples (a quarter or more), or in six of thirty 50 ms apart (under a quarter, but spanning the
    /// 250 ms threshold).
    @Test(arguments: [(disk: 5, lock: 3), (disk: 24, lock: 6)])
    func aRepeatWhoseSamplesShowAnotherCallerInAQuarterOfThemOrOverTheThresholdGetsAFileOfItsOwn(
        disk diskSamples: Int, lock lockSamples: Int
    ) throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        var publisher = Self.publisher(in: directory)
        let disk = ["appendToJournal", "handlePost", "serve"]
        _ = publisher.publishFinal(Self.report(id: "r1", stacks: [disk, disk]), now: 0)
        let lock = ["lockWriter", "waitForWriterLock", "serve"]
        let both = Self.report(
            id: "r2",
            stacks: Array(repeating: disk, count: diskSamples) + Array(repeating: lock, count: lockSamples))
        #expect(both.detection.thresholdMs == 250)
        let written = publisher.publishFinal(both, now: Self.second)
        #expect(written.occurrences == 1)
        #expect(try directory.names().count == 2)
    }

    @Test func aRepeatThatDiffersOnlyInItsInnermostApplicationFrameOrInFewSamplesIsFolded() throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        var publisher = Self.publisher(in: directory)
        _ = publisher.publishFinal(
            Self.report(id: "r1", stacks: [["compareKeys", "sortSessions", "serve"]]), now: 0)
        // Another leaf in every sample, and another caller in one sample of five (under a quarter).
        let repeated = Self.report(
            id: "r2",
            stacks: Array(repeating: ["copySession", "sortSessions", "serve"], count: 4) + [
                ["copySession", "logLine", "serve"]
            ])
        let folded = publisher.publishFinal(repeated, now: Self.second)
        #expect(folded.occurrences == 2)
        #expect(try directory.names().count == 1)
    }
}
