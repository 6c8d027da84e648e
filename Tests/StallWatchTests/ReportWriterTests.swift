// Tests of ReportWriter: permissions, symlink refusal, atomic replacement, bounded count, no leftovers.
import Foundation
import StallWatchTestSupport
import Testing

@testable import StallWatch

@Suite(.offPool) struct ReportWriterTests {
    @Test func createsAPrivateDirectoryAndPrivateFiles() throws {
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        let directory = scratch.file("nested/reports")
        let path = try ReportWriter(directory: directory).write(ReportSamples.report(id: "r1"))
        #expect(path == directory + "/stall-r1.json")
        #expect(ReportSamples.mode(of: directory) == 0o700)
        #expect(ReportSamples.mode(of: scratch.file("nested")) == 0o700)
        #expect(ReportSamples.mode(of: path) == 0o600)
        // Dates are kept to the millisecond, so compare the encodings.
        #expect(try ReportStore.load(path: path).encodedJSON() == ReportSamples.report(id: "r1").encodedJSON())
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == ReportSamples.report(id: "r1").encodedJSON())
    }

    @Test func refusesASymlinkedDirectory() throws {
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        try FileManager.default.createDirectory(atPath: scratch.file("real"), withIntermediateDirectories: false)
        try FileManager.default.createSymbolicLink(
            atPath: scratch.file("link"), withDestinationPath: scratch.file("real"))
        let error = #expect(throws: StallWatchError.self) {
            try ReportWriter(directory: scratch.file("link")).write(ReportSamples.report(id: "r1"))
        }
        #expect(error?.code == .report)
        #expect(error?.context["path"] == scratch.file("link"))
        #expect(error?.message.contains("symbolic link") == true)
        #expect(try FileManager.default.contentsOfDirectory(atPath: scratch.file("real")).isEmpty)
    }

    @Test func refusesAPathThatIsNotADirectory() throws {
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        _ = FileManager.default.createFile(atPath: scratch.file("plain"), contents: Data())
        let error = #expect(throws: StallWatchError.self) {
            try ReportWriter(directory: scratch.file("plain")).write(ReportSamples.report(id: "r1"))
        }
        #expect(error?.context["path"] == scratch.file("plain"))
        #expect(error?.message.contains("not a directory") == true)
    }

    @Test func replacesASymlinkPlantedAtTheFinalNameInsteadOfFollowingIt() throws {
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        let victim = scratch.file("victim.txt")
        try Data("precious".utf8).write(to: URL(fileURLWithPath: victim))
        let reports = scratch.file("reports")
        try FileManager.default.createDirectory(atPath: reports, withIntermediateDirectories: false)
        chmod(reports, 0o700)
        try FileManager.default.createSymbolicLink(atPath: reports + "/stall-r1.json", withDestinationPath: victim)
        let path = try ReportWriter(directory: reports).write(ReportSamples.report(id: "r1"))
        #expect(try String(contentsOfFile: victim, encoding: .utf8) == "precious")
        var info = stat()
        lstat(path, &info)
        #expect(info.st_mode & S_IFMT == S_IFREG)
    }

    @Test func theFinalReportReplacesTheProvisionalOne() throws {
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        let writer = ReportWriter(directory: scratch.path)
        try writer.write(ReportSamples.report(id: "r1", status: .ongoing))
        try writer.write(ReportSamples.report(id: "r1", status: .ended))
        #expect(try scratch.names() == ["stall-r1.json"])
        #expect(try ReportStore.load(path: scratch.file("stall-r1.json")).status == .ended)
    }

    @Test func keepsAtMostMaxReportsRemovingTheOldestAndOnlyOurFiles() throws {
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        _ = FileManager.default.createFile(atPath: scratch.file("notes.txt"), contents: Data("mine".utf8))
        _ = FileManager.default.createFile(atPath: scratch.file("other.json"), contents: Data("{}".utf8))
        let writer = ReportWriter(directory: scratch.path, maxReports: 3)
        for index in 1...5 {
            let path = try writer.write(ReportSamples.report(id: "r\(index)"))
            // Distinct, increasing modification times whatever the file system's timestamp granularity.
            var times = [
                timespec(tv_sec: 1_700_000_000 + index, tv_nsec: 0),
                timespec(tv_sec: 1_700_000_000 + index, tv_nsec: 0),
            ]
            utimensat(AT_FDCWD, path, &times, 0)
        }
        #expect(try scratch.names() == ["notes.txt", "other.json", "stall-r3.json", "stall-r4.json", "stall-r5.json"])
    }

    @Test func neverRemovesTheFileJustWrittenEvenIfItLooksOldest() throws {
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        let writer = ReportWriter(directory: scratch.path, maxReports: 1)
        try writer.write(ReportSamples.report(id: "new"))
        var future = [timespec(tv_sec: 4_000_000_000, tv_nsec: 0), timespec(tv_sec: 4_000_000_000, tv_nsec: 0)]
        utimensat(AT_FDCWD, scratch.file("stall-new.json"), &future, 0)
        try writer.write(ReportSamples.report(id: "newer"))
        #expect(try scratch.names() == ["stall-newer.json"])
    }

    @Test func leavesNoTemporaryFilesBehind() throws {
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        let writer = ReportWriter(directory: scratch.path)
        for index in 0..<20 { try writer.write(ReportSamples.report(id: "r\(index % 4)")) }
        #expect(try scratch.names().filter { $0.hasPrefix(".") }.isEmpty)
        #expect(try scratch.names().count == 4)
    }

    @Test func fileNamesAreSafeWhateverTheId() {
        #expect(ReportWriter.fileName(forReportID: "../../etc/passwd") == "stall-.._.._etc_passwd.json")
        #expect(
            ReportWriter.fileName(forReportID: "20261130T221500.123Z-4242-3")
                == "stall-20261130T221500.123Z-4242-3.json")
    }

    @Test func theDefaultDirectoryIsPerUser() {
        let environment = ProcessInfo.processInfo.environment["STALLWATCH_REPORT_DIRECTORY"]
        #expect(
            ReportWriter.defaultDirectory
                == (environment.flatMap { $0.isEmpty ? nil : $0 } ?? "/var/tmp/stallwatch-\(geteuid())"))
    }
}
