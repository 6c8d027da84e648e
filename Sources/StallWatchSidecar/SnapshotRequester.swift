// SnapshotRequester: asks the embedded StallWatch of another process for a lead-up snapshot, through its heartbeat.
import CStallWatchCore
import StallWatch

#if canImport(Glibc)
    import Glibc
#endif

/// Asks a process's embedded watchdog for a snapshot report (``Watchdog/snapshot(reason:)``) without a signal: it
/// adds one to the request count in each of the process's heartbeat segments (`pwrite`; the segment is never
/// mapped), and the watchdog, at its next wake-up, writes the report, then an answer file naming it, then the
/// answered count. The watchdog wakes while its loop is busy, and on the loop's next idle → busy edge: a loop
/// idle for the whole wait gets no snapshot (there is nothing new to see either).
package enum SnapshotRequester {
    /// One loop's answer.
    package struct Answer: Sendable, Equatable {
        package var segmentPath: String
        package var loopName: String
        /// The report written, or why none was (``failure``).
        package var reportPath: String?
        package var failure: String?
    }

    static let requestedOffset = MemoryLayout<sw_heartbeat>.offset(of: \.snapshot_requested)!
    static let answeredOffset = MemoryLayout<sw_heartbeat>.offset(of: \.snapshot_answered)!

    /// Requests a snapshot from every loop `pid` publishes a heartbeat for in `directory`, and waits up to
    /// `timeoutNanos` for their answers.
    ///
    /// - Returns: The loops that answered (a report path, or why they wrote none), in segment order.
    /// - Throws: `.noSuchProcess`; `.noAnswer` when the process publishes no heartbeat there, or none of its
    ///   watchdogs answered in time; `.invalidHeartbeat` when its segment fails validation; `.permissionDenied`.
    package static func request(pid: Int32, directory: String, timeoutNanos: UInt64) throws(SidecarError) -> [Answer] {
        guard ProcDirectory(processID: pid).exists else { throw SidecarError.noSuchProcess(pid: pid) }
        let segments = HeartbeatReader.segmentFiles(in: directory).filter { $0.pid == pid }
        guard !segments.isEmpty else {
            throw SidecarError(
                .noAnswer,
                "pid \(pid) publishes no StallWatch heartbeat in \(directory) (an embedded Watchdog publishes one "
                    + "with heartbeat on; --heartbeat-dir names another directory)", context: ["pid": String(pid)])
        }
        var pending: [(fd: Int32, segment: HeartbeatSegment, path: String, request: UInt64)] = []
        defer { for entry in pending { close(entry.fd) } }
        for (path, _) in segments {
            let reader = try HeartbeatReader(path: path, expectedPID: pid)
            let fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC)
            guard fd >= 0 else {
                let err = errno
                if err == EACCES || err == EPERM {
                    throw SidecarError.permissionDenied(pid: pid, doing: "writing the snapshot request into \(path)")
                }
                throw HeartbeatReader.invalid(path, "file", "cannot open: \(String(cString: strerror(err)))")
            }
            do throws(SidecarError) {
                let request = try readWord(fd, at: requestedOffset, path: path) &+ 1
                var value = request
                guard pwrite(fd, &value, 8, off_t(requestedOffset)) == 8 else {
                    throw HeartbeatReader.invalid(path, "snapshot_requested", "cannot write the request")
                }
                pending.append((fd, reader.segment, path, request))
            } catch {
                close(fd)
                throw error
            }
        }
        var answers: [String: Answer] = [:]
        let deadline = sw_monotonic_ns() &+ timeoutNanos
        while answers.count < pending.count {
            for entry in pending where answers[entry.path] == nil {
                let answered = try readWord(entry.fd, at: answeredOffset, path: entry.path)
                // Answered counts only grow; one at or past ours answers ours (a request made with ours was
                // served by the same report).
                guard answered >= entry.request, answered &- entry.request < 1 << 32 else { continue }
                answers[entry.path] = try readAnswer(
                    entry.path, request: entry.request, loopName: entry.segment.loopName)
            }
            if answers.count == pending.count || sw_monotonic_ns() >= deadline { break }
            guard ProcDirectory(processID: pid).exists else { throw SidecarError.noSuchProcess(pid: pid) }
            var pause = timespec(tv_sec: 0, tv_nsec: 20_000_000)
            nanosleep(&pause, nil)
        }
        guard !answers.isEmpty else {
            throw SidecarError(
                .noAnswer,
                "pid \(pid) did not answer the snapshot request within \(timeoutNanos / 1_000_000) ms: its watchdog "
                    + "is not running (a heartbeat published without one), predates snapshots, or its loop stayed "
                    + "idle (the watchdog wakes while the loop works)", context: ["pid": String(pid)])
        }
        return pending.compactMap { answers[$0.path] }
    }

    private static func readWord(_ fd: Int32, at offset: Int, path: String) throws(SidecarError) -> UInt64 {
        var value: UInt64 = 0
        guard pread(fd, &value, 8, off_t(offset)) == 8 else {
            throw HeartbeatReader.invalid(path, "size", "truncated while reading the snapshot words")
        }
        return value
    }

    /// Reads the answer file beside `segmentPath` without trusting it: a regular file of the segment's owner,
    /// bounded, two lines, answering `request` or a later one.
    static func readAnswer(_ segmentPath: String, request: UInt64, loopName: String) throws(SidecarError) -> Answer {
        let path = HeartbeatPublisher.snapshotAnswerPath(forSegment: segmentPath)
        func invalid(_ why: String) -> SidecarError { HeartbeatReader.invalid(path, "snapshot answer", why) }
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { throw invalid("cannot open: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var info = stat(), segmentInfo = stat()
        guard fstat(fd, &info) == 0, stat(segmentPath, &segmentInfo) == 0 else { throw invalid("fstat failed") }
        guard info.st_mode & S_IFMT == S_IFREG, info.st_uid == segmentInfo.st_uid, info.st_mode & 0o022 == 0 else {
            throw invalid("not a regular file of the segment's owner, writable by it alone")
        }
        var bytes = [UInt8](repeating: 0, count: HeartbeatPublisher.maxSnapshotAnswerBytes + 1)
        let count = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard count > 0, count <= HeartbeatPublisher.maxSnapshotAnswerBytes else { throw invalid("empty or too long") }
        let lines = String(decoding: bytes[..<count], as: UTF8.self).split(
            separator: "\n", omittingEmptySubsequences: false)
        guard lines.count >= 2, let answered = UInt64(lines[0]), answered >= request else {
            throw invalid("does not answer request \(request)")
        }
        let line = PrintableText.filtered(String(lines[1]))
        if line.hasPrefix("path /") {
            return Answer(segmentPath: segmentPath, loopName: loopName, reportPath: String(line.dropFirst(5)))
        }
        if line.hasPrefix("error ") {
            return Answer(segmentPath: segmentPath, loopName: loopName, failure: String(line.dropFirst(6)))
        }
        throw invalid("the second line is neither `path /…` nor `error …`")
    }
}
