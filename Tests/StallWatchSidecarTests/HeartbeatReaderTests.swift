// The heartbeat reader against real, hostile, truncated and random segments.
import CStallWatchCore
import Foundation
import StallWatch
import StallWatchTestSupport
import Testing

@testable import StallWatchSidecar

@Suite(.offPool, .serialized) struct HeartbeatReaderTests {
    /// A valid segment for this process, as bytes.
    static func validBytes(pid: Int32 = getpid()) -> [UInt8] {
        var header = sw_heartbeat()
        header.magic = SW_HEARTBEAT_MAGIC
        header.version = SW_HEARTBEAT_VERSION
        header.size = UInt32(MemoryLayout<sw_heartbeat>.size)
        header.pid = pid
        header.threshold_ns = 250_000_000
        header.hang_threshold_ns = 5_000_000_000
        header.start_time_ticks = HeartbeatPublisher.startTimeTicks(pid: pid) ?? 1
        header.state.word = 7 << 8 | 6
        return withUnsafeBytes(of: header) { Array($0) }
    }

    static func write(_ bytes: [UInt8], to path: String) {
        _ = FileManager.default.createFile(atPath: path, contents: Data(bytes), attributes: [.posixPermissions: 0o600])
    }

    @Test func aLoopWithoutANameOfItsOwnPublishesTheConfiguredLoopName() throws {
        let directory = SidecarFixtures.temporaryDirectory("hb-name")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var configuration = StallWatchConfiguration()
        configuration.heartbeatDirectory = directory
        configuration.loopName = "checkout"
        let publisher = try HeartbeatPublisher.publish(
            loop: try EventLoop(mainQueue: .disabled), configuration: configuration)
        defer { publisher.withdraw() }
        #expect(try HeartbeatReader(path: publisher.path, expectedPID: getpid()).segment.loopName == "checkout")
    }

    @Test func aPublishedSegmentValidatesAndFollowsTheLoop() throws {
        let directory = SidecarFixtures.temporaryDirectory("hb")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var configuration = StallWatchConfiguration()
        configuration.heartbeatDirectory = directory
        configuration.thresholdMs = 123
        let loop = try EventLoop(name: "hb-test", mainQueue: .disabled)
        let publisher = try HeartbeatPublisher.publish(loop: loop, configuration: configuration)
        #expect(
            publisher.path == "\(directory)/stallwatch.\(getpid())"
                || publisher.path.hasPrefix("\(directory)/stallwatch.\(getpid())."))
        var info = stat()
        #expect(stat(publisher.path, &info) == 0 && info.st_mode & 0o777 == 0o600)
        let reader = try HeartbeatReader(path: publisher.path, expectedPID: getpid())
        #expect(reader.segment.thresholdNanos == 123_000_000)
        #expect(reader.segment.loopName == "hb-test")
        let thread = Thread { loop.run(for: .milliseconds(300)) }
        thread.start()
        var sawRunning = false
        for _ in 0..<100 where !sawRunning {
            let state = try reader.read()
            sawRunning = state.loopThreadID != 0 && state.snapshot.sequence > 0
            usleep(5000)
        }
        #expect(sawRunning)
        usleep(400_000)
        publisher.withdraw()
        #expect(access(publisher.path, F_OK) != 0, "withdraw removes the file")
    }

    @Test func wrongMagicSizeVersionAndFieldsAreRejectedByName() throws {
        let valid = Self.validBytes()
        #expect(throws: Never.self) { try HeartbeatReader.decode(valid, path: "t", fileSize: valid.count) }
        func field(of bytes: [UInt8], fileSize: Int? = nil) -> String? {
            do {
                _ = try HeartbeatReader.decode(bytes, path: "t", fileSize: fileSize ?? bytes.count)
                return nil
            } catch {
                #expect(error.code == .invalidHeartbeat)
                return error.context["field"]
            }
        }
        var magic = valid
        magic[0] ^= 0xff
        #expect(field(of: magic) == "magic")
        #expect(field(of: Array(valid.prefix(100))) == "size")
        #expect(field(of: valid + [0]) == "size")
        #expect(field(of: valid, fileSize: 4096) == "size")
        var version = valid
        version[8] = 9
        #expect(field(of: version) == "version")
        var threshold = valid
        threshold.withUnsafeMutableBytes { $0.storeBytes(of: UInt64(1), toByteOffset: 24, as: UInt64.self) }
        #expect(field(of: threshold) == "threshold_ns")
        var phase = valid
        phase[64] = 5
        #expect(field(of: phase) == "state.word")
        var name = valid
        for i in 96..<128 { name[i] = 0x41 }
        #expect(field(of: name) == "loop_name")
    }

    @Test func randomAndMutatedSegmentsNeverCrashTheReader() throws {
        var generator = SeededGenerator()
        let valid = Self.validBytes()
        var accepted = 0
        for round in 0..<5000 {
            var bytes: [UInt8]
            if round % 2 == 0 {
                bytes = (0..<Int.random(in: 0...200, using: &generator)).map { _ in
                    UInt8.random(in: 0...255, using: &generator)
                }
            } else {
                bytes = valid
                for _ in 0..<Int.random(in: 1...6, using: &generator) {
                    bytes[Int.random(in: 0..<bytes.count, using: &generator)] = UInt8.random(
                        in: 0...255, using: &generator)
                }
            }
            do {
                _ = try HeartbeatReader.decode(bytes, path: "fuzz", fileSize: bytes.count)
                accepted += 1
            } catch {
                #expect(error.code == .invalidHeartbeat, "round \(round), seed \(generator.seed)")
            }
        }
        // Files too: every outcome is a clear error (or, for harmless mutations, a segment of this process).
        let directory = SidecarFixtures.temporaryDirectory("fuzz")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        for round in 0..<200 {
            var bytes =
                round % 3 == 0
                ? (0..<Int.random(in: 0...300, using: &generator)).map { _ in
                    UInt8.random(in: 0...255, using: &generator)
                } : valid
            if round % 3 == 1 {
                bytes[Int.random(in: 0..<bytes.count, using: &generator)] ^= UInt8.random(
                    in: 1...255, using: &generator)
            }
            if round % 3 == 2 { bytes = Array(bytes.prefix(Int.random(in: 0..<bytes.count, using: &generator))) }
            let path = "\(directory)/stallwatch.\(round + 1)"
            Self.write(bytes, to: path)
            do {
                _ = try HeartbeatReader(path: path)
            } catch {
                #expect(
                    [.invalidHeartbeat, .noSuchProcess, .permissionDenied].contains(error.code),
                    "\(error), round \(round), seed \(generator.seed)")
            }
        }
        _ = accepted
    }

    @Test func aSegmentNamingAProcessThatDoesNotMapItIsRejected() throws {
        let directory = SidecarFixtures.temporaryDirectory("owner")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // Claims to be this process, which has not mapped the file: not its owner.
        let path = "\(directory)/stallwatch.\(getpid())"
        Self.write(Self.validBytes(), to: path)
        #expect {
            _ = try HeartbeatReader(path: path)
        } throws: { error in
            (error as? SidecarError)?.context["field"] == "pid"
        }
        // Claims pid 1 (another start time, another owner): rejected too.
        let other = "\(directory)/stallwatch.1"
        Self.write(Self.validBytes(pid: 1), to: other)
        #expect(throws: SidecarError.self) { _ = try HeartbeatReader(path: other) }
        // A symlink is never followed; a group-writable file is refused.
        symlink(path, "\(directory)/stallwatch.2")
        #expect(throws: SidecarError.self) { _ = try HeartbeatReader(path: "\(directory)/stallwatch.2") }
        chmod(path, 0o666)
        #expect { _ = try HeartbeatReader(path: path) } throws: { ($0 as? SidecarError)?.context["field"] == "mode" }
    }

    @Test func segmentFilesAreFoundByName() {
        let directory = SidecarFixtures.temporaryDirectory("names")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        for name in [
            "stallwatch.12", "stallwatch.12.2", "stallwatch.x", ".stallwatch.12.tmp", "stallwatch.12.a", "other",
        ] {
            Self.write([], to: "\(directory)/\(name)")
        }
        #expect(
            HeartbeatReader.segmentFiles(in: directory).map { URL(fileURLWithPath: $0.path).lastPathComponent }
                == ["stallwatch.12", "stallwatch.12.2"])
    }
}
