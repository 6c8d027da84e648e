// HeartbeatReader: validates another process's heartbeat segment field by field and reads its loop state.
import CStallWatchCore
import StallWatch

#if canImport(Glibc)
    import Glibc
#endif

/// The header of a heartbeat segment, after validation.
struct HeartbeatSegment: Sendable, Equatable {
    var pid: Int32
    /// The loop thread (0 while the loop is not running).
    var loopThreadID: Int32
    var thresholdNanos: UInt64
    var hangThresholdNanos: UInt64
    var startTimeTicks: UInt64
    var loopName: String
}

/// The loop state read from a segment at one instant.
struct HeartbeatState: Sendable, Equatable {
    var snapshot: LoopSnapshot
    /// When the loop left a stall an in-process watchdog followed (0 if none).
    var stallEndNanos: UInt64
    var loopThreadID: Int32
}

/// Reads a heartbeat segment without trusting it: the file belongs to another process and may be stale,
/// truncated, or written by someone hostile. It is never mapped (a truncation would fault the reader); each
/// ``read()`` is one `pread` and every field is checked again.
final class HeartbeatReader: @unchecked Sendable {  // Used by one watching thread.
    let path: String
    private(set) var segment: HeartbeatSegment
    private let fd: Int32
    private let inode: UInt64

    static let size = MemoryLayout<sw_heartbeat>.size
    static let stateOffset = MemoryLayout<sw_heartbeat>.offset(of: \.state)!

    /// Opens and validates `path`: regular file, not a symlink, exactly one segment long; magic, version, size,
    /// thresholds, phase; the pid is alive, started when the segment says, runs as the file's owner and has the
    /// file mapped; the loop thread belongs to it.
    ///
    /// - Parameter expectedPID: When set, the segment must describe this process.
    /// - Throws: `.invalidHeartbeat` naming the first field that failed; `.noSuchProcess` when the publisher is gone.
    init(path: String, expectedPID: Int32? = nil) throws(SidecarError) {
        self.path = path
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else {
            let err = errno
            throw Self.invalid(path, "file", "cannot open: \(String(cString: strerror(err)))")
        }
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            close(fd)
            throw Self.invalid(path, "file", "fstat failed")
        }
        do throws(SidecarError) {
            guard info.st_mode & S_IFMT == S_IFREG else { throw Self.invalid(path, "file", "not a regular file") }
            guard Int(info.st_size) == Self.size else {
                throw Self.invalid(path, "size", "file is \(info.st_size) bytes, a segment is \(Self.size)")
            }
            guard info.st_mode & 0o022 == 0 else {
                throw Self.invalid(
                    path, "mode", "writable by group or others (mode \(String(info.st_mode & 0o777, radix: 8)))")
            }
            let bytes = try Self.readAll(fd: fd, path: path)
            let segment = try Self.decode(bytes, path: path, fileSize: Int(info.st_size))
            if let expectedPID, segment.pid != expectedPID {
                throw Self.invalid(path, "pid", "describes pid \(segment.pid), expected \(expectedPID)")
            }
            try Self.checkOwner(segment, path: path, fileOwner: info.st_uid, inode: UInt64(info.st_ino))
            self.segment = segment
        } catch {
            close(fd)
            throw error
        }
        self.fd = fd
        inode = UInt64(info.st_ino)
    }

    deinit { close(fd) }

    /// The segment's loop state now, validated again (a seqlock-style double read of the state word).
    ///
    /// - Throws: `.invalidHeartbeat` if the file was truncated or rewritten, or a field is out of range.
    func read() throws(SidecarError) -> HeartbeatState {
        for _ in 0..<8 {
            let bytes = try Self.readAll(fd: fd, path: path)
            let decoded = try Self.decode(bytes, path: path, fileSize: bytes.count)
            guard decoded.pid == segment.pid, decoded.startTimeTicks == segment.startTimeTicks else {
                throw Self.invalid(path, "pid", "the segment now describes another process")
            }
            var again: UInt64 = 0
            guard pread(fd, &again, 8, off_t(Self.stateOffset)) == 8 else {
                throw Self.invalid(path, "size", "truncated while reading")
            }
            let state = Self.loopState(bytes)
            guard again == state.word else { continue }  // torn read: the loop moved on meanwhile
            if decoded.loopThreadID != segment.loopThreadID {
                if decoded.loopThreadID != 0 { try Self.checkThread(decoded, path: path) }
                segment.loopThreadID = decoded.loopThreadID
            }
            let now = sw_monotonic_ns()
            // A phase start in the future: another time namespace, or a writer that is not the loop.
            guard state.phase_start_ns <= now &+ 1_000_000_000 else {
                throw Self.invalid(path, "state.phase_start_ns", "lies in the future (another time namespace?)")
            }
            return HeartbeatState(
                snapshot: LoopSnapshot(
                    sequence: state.word >> 8, activity: LoopActivity(phaseCode: UInt32(state.word & 0xff)),
                    phaseStartNanos: state.phase_start_ns),
                stallEndNanos: state.stall_end_ns, loopThreadID: decoded.loopThreadID)
        }
        throw Self.invalid(path, "state.word", "changes faster than it can be read")
    }

    // MARK: Validation

    /// Decodes and checks every field that needs no system access. Pure: the fuzz tests drive it.
    ///
    /// - Parameters:
    ///   - bytes: The file's content.
    ///   - fileSize: The file's size.
    /// - Throws: `.invalidHeartbeat` naming the first bad field.
    static func decode(_ bytes: [UInt8], path: String, fileSize: Int) throws(SidecarError) -> HeartbeatSegment {
        guard bytes.count == size, fileSize == size else {
            throw invalid(path, "size", "\(bytes.count) bytes (file \(fileSize)), a segment is \(size)")
        }
        let header = bytes.withUnsafeBytes { $0.loadUnaligned(as: sw_heartbeat.self) }
        guard header.magic == SW_HEARTBEAT_MAGIC else {
            throw invalid(path, "magic", "0x\(String(header.magic, radix: 16)) is not a StallWatch heartbeat")
        }
        guard header.version == SW_HEARTBEAT_VERSION else {
            throw invalid(path, "version", "version \(header.version), this reader knows \(SW_HEARTBEAT_VERSION)")
        }
        guard Int(header.size) == size else { throw invalid(path, "size", "header says \(header.size) bytes") }
        guard header.pid > 0 else { throw invalid(path, "pid", "\(header.pid) is not a process id") }
        guard header.loop_tid >= 0 else { throw invalid(path, "loop_tid", "\(header.loop_tid) is not a thread id") }
        let ms: UInt64 = 1_000_000
        guard (10 * ms...600_000 * ms).contains(header.threshold_ns) else {
            throw invalid(path, "threshold_ns", "\(header.threshold_ns) ns is outside 10 ms … 600 s")
        }
        guard (header.threshold_ns...3_600_000 * ms).contains(header.hang_threshold_ns) else {
            throw invalid(path, "hang_threshold_ns", "\(header.hang_threshold_ns) ns is outside threshold … 3600 s")
        }
        guard header.start_time_ticks > 0 else { throw invalid(path, "start_time_ticks", "is 0") }
        let code = UInt32(header.state.word & 0xff)
        guard [0, 1, 2, 3, 6, 7, 8].contains(code) else {
            throw invalid(path, "state.word", "phase code \(code) is not a loop activity")
        }
        let nameBytes = withUnsafeBytes(of: header.loop_name) { Array($0) }
        guard let end = nameBytes.firstIndex(of: 0) else {
            throw invalid(path, "loop_name", "not NUL-terminated")
        }
        // Another user's process may have written it: printable text only (no escapes, no newlines).
        let name = PrintableText.filtered(String(decoding: nameBytes[..<end], as: UTF8.self))
        return HeartbeatSegment(
            pid: header.pid, loopThreadID: header.loop_tid, thresholdNanos: header.threshold_ns,
            hangThresholdNanos: header.hang_threshold_ns, startTimeTicks: header.start_time_ticks, loopName: name)
    }

    /// The publisher exists, is the process that started when the segment says, runs as the file's owner,
    /// and has this very file (inode) mapped; its loop thread belongs to it.
    static func checkOwner(_ segment: HeartbeatSegment, path: String, fileOwner: uid_t, inode: UInt64)
        throws(SidecarError)
    {
        try checkPublisher(
            pid: segment.pid, startTimeTicks: segment.startTimeTicks, path: path, fileOwner: fileOwner, inode: inode,
            invalid: invalid)
        if segment.loopThreadID != 0 { try checkThread(segment, path: path) }
    }

    /// The process `pid` exists, started at `startTimeTicks`, runs as the file's owner and has this very file
    /// (inode) mapped: what a published file (a heartbeat segment, a task table) must show to be trusted as its.
    static func checkPublisher(
        pid: Int32, startTimeTicks: UInt64, path: String, fileOwner: uid_t, inode: UInt64,
        invalid: (String, String, String) -> SidecarError
    ) throws(SidecarError) {
        var procInfo = stat()
        guard stat("/proc/\(pid)", &procInfo) == 0 else { throw SidecarError.noSuchProcess(pid: pid) }
        guard let started = HeartbeatPublisher.startTimeTicks(pid: pid) else {
            throw SidecarError.noSuchProcess(pid: pid)
        }
        guard started == startTimeTicks else {
            throw invalid(path, "start_time_ticks", "pid \(pid) was reused: a stale file of an exited process")
        }
        if let state = ProcDirectory(processID: pid).status()?.state, state == "Z" || state == "X" {
            throw SidecarError.noSuchProcess(pid: pid)
        }
        guard procInfo.st_uid == fileOwner else {
            throw invalid(
                path, "pid", "pid \(pid) runs as uid \(procInfo.st_uid) but the file belongs to uid \(fileOwner)")
        }
        guard let maps = ProcDirectory(processID: pid).maps() else {
            if errno == EACCES || errno == EPERM {
                throw SidecarError.permissionDenied(pid: pid, doing: "reading /proc/\(pid)/maps")
            }
            throw SidecarError.noSuchProcess(pid: pid)
        }
        let mapped = maps.contains { $0.inode == inode }
        guard mapped else { throw invalid(path, "pid", "pid \(pid) does not have this file mapped: not its owner") }
    }

    static func checkThread(_ segment: HeartbeatSegment, path: String) throws(SidecarError) {
        guard ProcDirectory(processID: segment.pid, threadID: segment.loopThreadID).exists else {
            throw invalid(path, "loop_tid", "thread \(segment.loopThreadID) is not a thread of pid \(segment.pid)")
        }
    }

    private static func readAll(fd: Int32, path: String) throws(SidecarError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: size + 1)
        var total = 0
        while total < bytes.count {
            let n = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + total, $0.count - total, off_t(total)) }
            if n < 0 {
                if errno == EINTR { continue }
                throw invalid(path, "file", "read failed: \(String(cString: strerror(errno)))")
            }
            if n == 0 { break }
            total += n
        }
        return Array(bytes[..<total])
    }

    private static func loopState(_ bytes: [UInt8]) -> sw_loop_state {
        bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: stateOffset, as: sw_loop_state.self) }
    }

    static func invalid(_ path: String, _ field: String, _ why: String) -> SidecarError {
        SidecarError(
            .invalidHeartbeat, "heartbeat \(path): \(field): \(why)", context: ["path": path, "field": field])
    }

    // MARK: Finding segments

    /// The segments in `directory` (`stallwatch.<pid>` and `stallwatch.<pid>.<n>`), with the pid in the name.
    static func segmentFiles(in directory: String) -> [(path: String, pid: Int32)] {
        guard let dir = opendir(directory) else { return [] }
        defer { closedir(dir) }
        var result: [(String, Int32)] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            guard name.hasPrefix(HeartbeatPublisher.fileNamePrefix) else { continue }
            let rest = name.dropFirst(HeartbeatPublisher.fileNamePrefix.count).split(separator: ".")
            guard (1...2).contains(rest.count), let pid = Int32(rest[0]), pid > 0,
                rest.count == 1 || Int(rest[1]) != nil
            else { continue }
            result.append((directory + "/" + name, pid))
        }
        return result.sorted { $0.0 < $1.0 }
    }
}
