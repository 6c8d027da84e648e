// Snapshot requests through the heartbeat segment: the count a requester writes, and the answer file naming the report.
import CStallWatchCore

#if canImport(Glibc)
    import Glibc
#endif

extension HeartbeatPublisher {
    /// The answer to snapshot requests, next to the segment (`stallwatch.<pid>.snapshot`): two lines, the request
    /// count answered and `path <report>` (or `error <message>`), written whole (temporary file, rename) before
    /// the count is stored in the segment's `snapshot_answered`.
    package static func snapshotAnswerPath(forSegment path: String) -> String { path + ".snapshot" }

    /// The longest answer file a reader accepts.
    package static let maxSnapshotAnswerBytes = 8192

    /// The snapshot request count written into the segment from outside (0: none yet). One atomic load.
    var snapshotRequested: UInt64 { sw_heartbeat_snapshot_requested(segment) }

    /// Answers the requests up to `count` with the report written (its path) or why none was: writes the answer
    /// file, then stores `count` as answered. Best effort: a requester that sees no answer times out.
    func answerSnapshot(count: UInt64, result: Result<String, StallWatchError>) {
        // Withdrawn: the watchdog is stopping; an answer file now would outlive the segment.
        guard !withdrawn.load(ordering: .acquiring) else { return }
        let line: String
        switch result {
        case .success(let reportPath): line = "path \(reportPath)"
        case .failure(let error): line = "error \(PrintableText.filtered(error.message))"
        }
        let text = "\(count)\n\(line)\n"
        let directory = String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)])
        guard let (fd, temporary) = try? HeartbeatLeftovers.createTemporary(in: directory, pid: getpid()) else {
            return
        }
        let bytes = Array(text.utf8.prefix(Self.maxSnapshotAnswerBytes))
        let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        close(fd)
        guard written == bytes.count, rename(temporary, Self.snapshotAnswerPath(forSegment: path)) == 0 else {
            unlink(temporary)
            return
        }
        sw_heartbeat_snapshot_answer(segment, count)
    }
}
