// What a report directory holds: tightened to 0700, no leftovers of a killed writer, errors that name paths.
import Foundation
import StallWatchTestSupport
import Testing

@testable import StallWatch

@Suite(.offPool) struct ReportDirectoryHygieneTests {
    @Test func anExisting0755DirectoryIsTightenedTo0700OnTheFirstWrite() throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        chmod(directory.path, 0o755)
        try ReportWriter(directory: directory.path).write(ReportSamples.report(id: "r1"))
        #expect(ReportSamples.mode(of: directory.path) & 0o777 == 0o700)
    }

    @Test func temporariesOfAKilledWriterAreRemovedWhenAWatcherStarts() throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        // A writer that no longer exists (pid beyond pid_max), a minute and a half ago; one of ours, just now.
        let dead = directory.file(".stall-r1.json.tmp-4194303-12345")
        let live = directory.file(".stall-r2.json.tmp-\(getpid())-6789")
        for path in [dead, live] { #expect(FileManager.default.createFile(atPath: path, contents: Data("{".utf8))) }
        var old = [timespec(tv_sec: time(nil) - 90, tv_nsec: 0), timespec(tv_sec: time(nil) - 90, tv_nsec: 0)]
        #expect(utimensat(AT_FDCWD, dead, &old, 0) == 0)
        #expect(utimensat(AT_FDCWD, live, &old, 0) == 0)
        var configuration = StallWatchConfiguration()
        configuration.reportDirectory = directory.path
        _ = StallPublisher(configuration: configuration, emit: { _ in })
        #expect(!FileManager.default.fileExists(atPath: dead))
        #expect(FileManager.default.fileExists(atPath: live), "a live writer's temporary stays")
    }

    @Test func aWriteFailureNamesTheFullPath() throws {
        let directory = try ScratchDirectory()
        defer { directory.remove() }
        // A directory whose entries cannot be created: the error names the directory's full path.
        chmod(directory.path, 0o500)
        defer { chmod(directory.path, 0o700) }
        var configuration = StallWatchConfiguration()
        configuration.reportDirectory = directory.path + "/sub"
        let writer = ReportWriter(directory: directory.path + "/sub")
        if geteuid() == 0 {
            // root ignores the mode: a file in the way of the directory makes the failure instead.
            #expect(FileManager.default.createFile(atPath: directory.path + "/sub", contents: nil))
        }
        #expect {
            try writer.write(ReportSamples.report(id: "r1"))
        } throws: { error in
            (error as? StallWatchError)?.message.contains(directory.path + "/sub") == true
        }
    }
}
