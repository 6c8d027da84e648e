// Publishing the heartbeat in a shared directory where another user plants files, and loop names as text.
import CStallWatchCore
import Foundation
import StallWatchTestSupport
import Testing

@testable import StallWatch
@testable import StallWatchSidecar

@Suite(.offPool, .serialized) struct HeartbeatPublishingTests {
    /// A sticky, world-writable directory like `/dev/shm`.
    static func sharedDirectory(_ label: String) -> String {
        let directory = SidecarFixtures.temporaryDirectory(label)
        chmod(directory, 0o1777)
        return directory
    }

    /// Creates `names` in `directory` as the user `nobody` (so this process can neither replace nor remove them).
    /// Needs root, to run as `nobody`.
    static func plantAsNobody(_ names: [String], in directory: String) throws {
        try #require(geteuid() == 0, "needs root: plants files as the user nobody with runuser")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/sbin/runuser")
        process.arguments = ["-u", "nobody", "--", "/bin/sh", "-c", "cd \"$0\" && touch \"$@\"", directory] + names
        try process.run()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        for name in names {
            var info = stat()
            #expect(lstat(directory + "/" + name, &info) == 0 && info.st_uid == 65534, "\(name) planted")
        }
    }

    @Test func filesPlantedByAnotherUserDoNotStopPublishing() throws {
        let directory = Self.sharedDirectory("hb-planted")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let pid = getpid()
        // The temporary name an earlier build used, and the final names of the first few loops of this process.
        let planted = [".stallwatch.\(pid).tmp", "stallwatch.\(pid)"] + (2...6).map { "stallwatch.\(pid).\($0)" }
        try Self.plantAsNobody(planted, in: directory)
        var configuration = StallWatchConfiguration()
        configuration.heartbeatDirectory = directory
        let loop = try EventLoop(name: "planted", mainQueue: .disabled)
        let publisher = try HeartbeatPublisher.publish(loop: loop, configuration: configuration)
        defer { publisher.withdraw() }
        #expect(try HeartbeatReader(path: publisher.path, expectedPID: pid).segment.loopName == "planted")
        #expect(HeartbeatReader.segmentFiles(in: directory).contains { $0.path == publisher.path })
        // No temporary of ours is left behind.
        let names = try FileManager.default.contentsOfDirectory(atPath: directory)
        #expect(names.filter { $0.hasSuffix(".tmp") } == [".stallwatch.\(pid).tmp"], "\(names)")
    }

    /// The attack as it happens: the service runs as one user (`nobody`), another (`daemon`) plants the names
    /// the service would use for its pid in the shared directory before it publishes. Needs root (to run as those
    /// users); the demo runs from a copy `nobody` can reach (``OtherUserExecutable``), wherever the checkout is.
    @Test(.timeLimit(.minutes(3)))
    func aServiceOfOneUserPublishesDespiteNamesAnotherUserPlanted() throws {
        let demo = try OtherUserExecutable("stallwatch-demo")
        // Beside the copy, so both users reach them whatever TMPDIR is: a sticky shared directory like /dev/shm,
        // and the service's report directory.
        let directory = demo.directory + "/shared"
        let reports = demo.directory + "/reports"
        for (path, mode) in [(directory, 0o1777), (reports, 0o777)] {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
            chmod(path, mode_t(mode))
        }
        let service = Process()
        service.executableURL = URL(fileURLWithPath: "/usr/sbin/runuser")
        // The shell prints its pid, waits for a line, then becomes the service with that pid.
        service.arguments = [
            "-u", demo.user, "--", "/bin/sh", "-c",
            "echo $$; read go; exec \"$0\" stall --kind sleep --duration-ms 100 --delay-ms 20000 --no-watchdog",
            demo.path,
        ]
        var environment = ProcessInfo.processInfo.environment
        environment["STALLWATCH_HEARTBEAT_DIRECTORY"] = directory
        environment["STALLWATCH_REPORT_DIRECTORY"] = reports
        service.environment = environment
        let input = Pipe()
        let output = Pipe()
        service.standardInput = input
        service.standardOutput = output
        service.standardError = FileHandle.nullDevice
        try service.run()
        defer {
            if service.isRunning { kill(service.processIdentifier, SIGKILL) }
            service.waitUntilExit()
        }
        var line = Data()
        while !line.contains(UInt8(ascii: "\n")) {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            line.append(chunk)
        }
        let pid = try #require(Int32(String(decoding: line, as: UTF8.self).split(separator: "\n").first ?? ""))
        defer { kill(pid, SIGKILL) }  // runuser's child, the service itself
        let planted = [".stallwatch.\(pid).tmp", "stallwatch.\(pid)"]
        let plant = Process()
        plant.executableURL = URL(fileURLWithPath: "/usr/sbin/runuser")
        plant.arguments = ["-u", "daemon", "--", "/bin/sh", "-c", "cd \"$0\" && touch \"$@\"", directory] + planted
        try plant.run()
        plant.waitUntilExit()
        input.fileHandleForWriting.write(Data("go\n".utf8))
        let deadline = ContinuousClock.now + .seconds(20)
        var published: String?
        while published == nil, ContinuousClock.now < deadline, service.isRunning {
            published =
                HeartbeatReader.segmentFiles(in: directory).first { entry in
                    var info = stat()
                    return entry.pid == pid && stat(entry.path, &info) == 0 && info.st_uid == 65534
                }?.path
            if published == nil { usleep(10_000) }
        }
        let path = try #require(published, "the service published a segment of its own")
        #expect(!planted.contains((path as NSString).lastPathComponent))
        #expect(try HeartbeatReader(path: path, expectedPID: pid).segment.pid == pid)
    }

    @Test func aStaleTemporaryOfAKilledWriterIsRemovedAtTheNextStart() throws {
        let directory = SidecarFixtures.temporaryDirectory("hb-stale")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let stale = directory + "/.stallwatch.4194301.0123456789abcdef.tmp"
        let fresh = directory + "/.stallwatch.4194302.fedcba9876543210.tmp"
        for path in [stale, fresh] { #expect(FileManager.default.createFile(atPath: path, contents: Data(count: 64))) }
        var old = [timespec(tv_sec: time(nil) - 3600, tv_nsec: 0), timespec(tv_sec: time(nil) - 3600, tv_nsec: 0)]
        #expect(utimensat(AT_FDCWD, stale, &old, 0) == 0)
        var configuration = StallWatchConfiguration()
        configuration.heartbeatDirectory = directory
        let publisher = try HeartbeatPublisher.publish(
            loop: try EventLoop(mainQueue: .disabled), configuration: configuration)
        defer { publisher.withdraw() }
        #expect(!FileManager.default.fileExists(atPath: stale))
        #expect(FileManager.default.fileExists(atPath: fresh), "a writer may be using a fresh one")
    }

    @Test func loopNamesAreFilteredToPrintableTextWherePublishedAndWhereRead() throws {
        let directory = SidecarFixtures.temporaryDirectory("hb-text")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var configuration = StallWatchConfiguration()
        configuration.heartbeatDirectory = directory
        configuration.loopName = "check\u{1B}]0;owned\u{07}out\n\u{202E}é"
        let publisher = try HeartbeatPublisher.publish(
            loop: try EventLoop(mainQueue: .disabled), configuration: configuration)
        defer { publisher.withdraw() }
        #expect(
            try HeartbeatReader(path: publisher.path, expectedPID: getpid()).segment.loopName == "check]0;ownedouté")
        // A segment written by someone else, with raw escapes in its name, is read as printable text.
        var bytes = HeartbeatReaderTests.validBytes()
        let offset = MemoryLayout<sw_heartbeat>.offset(of: \sw_heartbeat.loop_name)!
        let hostile = Array("a\u{1B}[2Jb\u{9B}c\r\nd".utf8)
        bytes.replaceSubrange(offset..<offset + hostile.count, with: hostile)
        let path = directory + "/stallwatch.\(getpid()).99"
        HeartbeatReaderTests.write(bytes, to: path)
        // The reader checks that the pid maps the file: map it, as a publisher would.
        let fd = open(path, O_RDWR)
        defer { close(fd) }
        let size = MemoryLayout<sw_heartbeat>.size
        let mapping = try #require(mmap(nil, size, PROT_READ, MAP_SHARED, fd, 0))
        defer { munmap(mapping, size) }
        #expect(try HeartbeatReader(path: path, expectedPID: getpid()).segment.loopName == "a[2Jbcd")
    }

    @Test(.timeLimit(.minutes(3)))
    func aHeartbeatThatCannotBePublishedIsReportedAsAnEvent() throws {
        let directory = SidecarFixtures.temporaryDirectory("hb-fail")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var configuration = StallWatchConfiguration()
        configuration.heartbeat = true
        configuration.heartbeatDirectory = directory + "/missing"
        configuration.reportDirectory = directory
        let failures = Locked<[String]>([])
        let seen = DispatchSemaphore(value: 0)
        let watchdog = Watchdog(loop: try EventLoop(mainQueue: .disabled), configuration: configuration) { event in
            if case .heartbeatFailed(let error) = event {
                failures.withLock { $0.append(error.message) }
                seen.signal()
            }
        }
        try watchdog.start()
        defer { watchdog.stop() }
        #expect(seen.wait(timeout: .now() + 10) == .success)
        let message = failures.withLock { $0.first } ?? ""
        #expect(message.contains(directory + "/missing/"), "names the full path: \(message)")
        #expect(watchdog.heartbeatError != nil)
        #expect(
            JSONLinesEventWriter.line(for: .heartbeatFailed(watchdog.heartbeatError!))?.contains("heartbeatFailed")
                == true)
    }
}
