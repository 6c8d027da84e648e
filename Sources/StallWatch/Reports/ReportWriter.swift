// ReportWriter: writes stall reports atomically into a private directory and keeps that directory bounded.
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Writes one JSON file per stall (`stall-<id>.json`), atomically, mode 0600, in a 0700 directory: the one place
/// that names report files, builds their paths, rewrites them and keeps the directory bounded.
///
/// Each write goes to a fresh temporary name in the same directory (`openat` with
/// `O_CREAT | O_EXCL | O_NOFOLLOW`), is `fsync`ed, renamed over the final name and the directory is `fsync`ed:
/// a reader sees the old file or the new one, never half of one, and a planted symlink is replaced, never
/// followed. Writing the same report id again (the provisional `ongoing` report, then the final one) replaces
/// the file. After each write the oldest reports (by modification time) beyond `maxReports` or `maxTotalBytes`
/// are removed; only files named like ours are touched and the file just written is never removed.
///
/// - Warning: does blocking I/O (`fsync`): call it from the watchdog or a writer thread, never the loop thread.
package struct ReportWriter: Sendable {
    /// `$STALLWATCH_REPORT_DIRECTORY` when set and not empty, else `/var/tmp/stallwatch-<uid>`.
    package static var defaultDirectory: String { StallWatchConfiguration.defaultReportDirectory() }

    package let directory: String
    /// Most report files kept (at least 1).
    package let maxReports: Int
    /// Most bytes of report files kept, or nil for no byte bound. The newest report is kept even if larger.
    let maxTotalBytes: Int?

    /// - Parameters:
    ///   - directory: created (mode 0700, with missing parents) on the first write if missing.
    ///   - maxReports: report files to keep; at least 1. The default is the `maxReports` setting's.
    ///   - maxTotalBytes: bytes of report files to keep, or nil.
    package init(
        directory: String = ReportWriter.defaultDirectory, maxReports: Int = StallWatchConfiguration().maxReports,
        maxTotalBytes: Int? = 64 << 20
    ) {
        self.directory = directory
        self.maxReports = max(1, maxReports)
        self.maxTotalBytes = maxTotalBytes
    }

    /// The file name for a report id: `stall-<id>.json`, with anything but `[A-Za-z0-9._-]` replaced by `_`.
    static func fileName(forReportID id: String) -> String {
        let safe = id.unicodeScalars.map { scalar -> Character in
            switch scalar {
            case "A"..."Z", "a"..."z", "0"..."9", "-", "_", ".": Character(scalar)
            default: "_"
            }
        }
        return "stall-" + String(safe) + ".json"
    }

    /// The writer of the reports `configuration` describes: its report directory and `maxReports`.
    package init(configuration: StallWatchConfiguration) {
        self.init(directory: configuration.reportDirectoryPath, maxReports: configuration.maxReports)
    }

    /// The path of the file of report `id` in `directory`.
    package static func path(ofReportID id: String, in directory: String) -> String {
        (directory as NSString).appendingPathComponent(fileName(forReportID: id))
    }

    /// The path of the file of report `id` in this writer's directory.
    package func path(ofReportID id: String) -> String { Self.path(ofReportID: id, in: directory) }

    /// Whether the file of report `id` is still there (not pruned, not deleted).
    func hasFile(ofReportID id: String) -> Bool { access(path(ofReportID: id), F_OK) == 0 }

    /// Removes the file of report `id`, if there is one (a provisional report that gets no file of its own).
    func removeFile(ofReportID id: String) { unlink(path(ofReportID: id)) }

    /// Replaces the file of `report` only if it is still there: a report pruned or deleted meanwhile stays gone.
    /// - Returns: Whether it was written.
    @discardableResult
    func rewrite(_ report: StallReport) throws(StallWatchError) -> Bool {
        guard hasFile(ofReportID: report.id) else { return false }
        try write(report)
        return true
    }

    /// Whether `name` is a report file name this writer creates (and may therefore remove).
    package static func isReportFileName(_ name: String) -> Bool {
        name.hasPrefix("stall-") && name.hasSuffix(".json") && name.count > "stall-.json".count
    }

    /// Writes (or replaces) the file of `report` and prunes old reports.
    /// - Returns: the path written.
    /// - Throws: `StallWatchError(.report)` with `context["path"]` when the directory is a symlink, not a
    ///   directory, owned by another user, or when a write fails (then `errno` and `context["call"]` are set).
    @discardableResult
    package func write(_ report: StallReport) throws(StallWatchError) -> String {
        let data = try report.encodedJSON()
        let directoryFD = try ReportDirectory.open(directory, forWriting: true)
        defer { close(directoryFD) }
        let name = Self.fileName(forReportID: report.id)
        let path = path(ofReportID: report.id)
        let temporary = try writeTemporary(data, in: directoryFD, for: name)
        guard renameat(directoryFD, temporary, directoryFD, name) == 0 else {
            let error = errno
            unlinkat(directoryFD, temporary, 0)
            throw ReportDirectory.failure("renameat", errno: error, path: path)
        }
        // The rename is durable only once the directory entry is on disk.
        guard fsync(directoryFD) == 0 else { throw ReportDirectory.failure("fsync", errno: errno, path: directory) }
        prune(directoryFD, keeping: name)
        return path
    }

    /// Creates a fresh temporary file next to `name`, writes and syncs `data`; returns the temporary's name.
    private func writeTemporary(_ data: Data, in directoryFD: Int32, for name: String) throws(StallWatchError)
        -> String
    {
        var attempt = 0
        while true {
            let temporary = ".\(name).tmp-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
            let fd = openat(directoryFD, temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
            if fd < 0 {
                let error = errno
                if error == EINTR || (error == EEXIST && attempt < 8) {
                    attempt += 1
                    continue
                }
                throw ReportDirectory.failure("openat", errno: error, path: directory + "/" + temporary)
            }
            do throws(StallWatchError) {
                // The umask can only remove bits; make the mode exactly 0600 whatever it is.
                guard fchmod(fd, 0o600) == 0 else {
                    throw ReportDirectory.failure("fchmod", errno: errno, path: directory + "/" + temporary)
                }
                try writeAll(fd, data, path: directory + "/" + temporary)
                guard fsync(fd) == 0 else {
                    throw ReportDirectory.failure("fsync", errno: errno, path: directory + "/" + temporary)
                }
                guard close(fd) == 0 else {
                    unlinkat(directoryFD, temporary, 0)
                    throw ReportDirectory.failure("close", errno: errno, path: directory + "/" + temporary)
                }
                return temporary
            } catch {
                close(fd)
                unlinkat(directoryFD, temporary, 0)
                throw error
            }
        }
    }

    private func writeAll(_ fd: Int32, _ data: Data, path: String) throws(StallWatchError) {
        var written = 0
        while written < data.count {
            let count = data.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + written, $0.count - written) }
            if count < 0 {
                if errno == EINTR { continue }
                throw ReportDirectory.failure("write", errno: errno, path: path)
            }
            written += count
        }
    }

    /// Removes the temporaries of writers that were killed mid-write (their pid is gone and the file is over a
    /// minute old, or it is over 10 minutes old whoever wrote it). Called when a watcher starts; best effort.
    func removeLeftovers() {
        guard access(directory, F_OK) == 0, let directoryFD = try? ReportDirectory.open(directory, forWriting: true)
        else { return }
        defer { close(directoryFD) }
        let now = time(nil)
        ReportDirectory.forEachEntry(directoryFD) { name in
            guard name.hasPrefix(".stall-"), let marker = name.range(of: ".json.tmp-") else { return }
            var info = stat()
            guard fstatat(directoryFD, name, &info, AT_SYMLINK_NOFOLLOW) == 0, info.st_mode & S_IFMT == S_IFREG
            else { return }
            let age = now - info.st_mtim.tv_sec
            let writer = name[marker.upperBound...].split(separator: "-").first.flatMap { Int32($0) }
            let writerGone = writer.map { kill($0, 0) != 0 && errno == ESRCH } ?? true
            if age > 600 || (writerGone && age > 60) { unlinkat(directoryFD, name, 0) }
        }
    }

    /// Removes the oldest reports beyond the bounds, and temporaries a crashed writer left over 10 minutes ago.
    /// Failures are ignored: pruning is best-effort and must not lose the report just written.
    private func prune(_ directoryFD: Int32, keeping newest: String) {
        var reports: [(name: String, modified: Int, size: Int)] = []
        let now = time(nil)
        ReportDirectory.forEachEntry(directoryFD) { name in
            var info = stat()
            guard fstatat(directoryFD, name, &info, AT_SYMLINK_NOFOLLOW) == 0, info.st_mode & S_IFMT == S_IFREG
            else { return }
            if Self.isReportFileName(name) {
                let modified = Int(info.st_mtim.tv_sec) * 1_000_000_000 + Int(info.st_mtim.tv_nsec)
                reports.append((name, modified, Int(info.st_size)))
            } else if name.hasPrefix(".stall-"), name.contains(".json.tmp-"), now - info.st_mtim.tv_sec > 600 {
                unlinkat(directoryFD, name, 0)
            }
        }
        reports.sort { ($0.modified, $0.name) < ($1.modified, $1.name) }
        var count = reports.count
        var bytes = reports.reduce(0) { $0 + $1.size }
        for report in reports where report.name != newest {
            let overCount = count > maxReports
            let overBytes = maxTotalBytes.map { bytes > $0 } ?? false
            guard overCount || overBytes else { break }
            if unlinkat(directoryFD, report.name, 0) == 0 {
                count -= 1
                bytes -= report.size
            }
        }
    }
}
