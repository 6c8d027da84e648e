// ReportStore: reads a directory of stall reports, tolerating files that are damaged or not ours.
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Reads stall reports from a directory (usually one a ``ReportWriter`` fills).
///
/// Enumeration streams: one file is read and decoded at a time. A file that is empty, truncated, not JSON,
/// JSON but not a report, or from a newer schema is skipped and described by one ``Problem``; it never stops
/// the enumeration.
public struct ReportStore: Sendable {
    /// A report and the file it came from.
    package struct Entry: Sendable {
        package let path: String
        package let report: StallReport

        package init(path: String, report: StallReport) {
            self.path = path
            self.report = report
        }
    }

    /// A file that was skipped, and why (one line).
    package struct Problem: Sendable, Equatable, CustomStringConvertible {
        let path: String
        let reason: String
        package var description: String { "skipping \(path): \(reason)" }
    }

    /// The outcome of looking a report up by id or id prefix.
    package enum Lookup: Sendable {
        case found(Entry)
        case notFound
        /// More than one report id starts with the prefix; their ids, sorted.
        case ambiguous([String])
    }

    package let directory: String

    package init(directory: String = ReportWriter.defaultDirectory) {
        self.directory = directory
    }

    /// Calls `body` for every readable report (files `*.json` not starting with `.`), in directory order, and
    /// `onProblem` once for every other such file.
    /// - Throws: `StallWatchError(.report)` when the directory itself cannot be opened.
    package func forEachReport(
        listing: Bool = false, onProblem: (Problem) -> Void, _ body: (Entry) -> Void
    ) throws(StallWatchError) {
        let directoryFD = try ReportDirectory.open(directory, forWriting: false)
        defer { close(directoryFD) }
        var names: [String] = []
        ReportDirectory.forEachEntry(directoryFD) { name in
            if name.hasSuffix(".json"), !name.hasPrefix(".") { names.append(name) }
        }
        // Decoding dominates (tens of KB of JSON a report): decode a bounded batch on all CPUs, then hand the
        // results to the callbacks on this thread, in directory order. Memory stays one batch deep.
        let batchSize = 64
        var start = 0
        // `directory/name` without NSString path handling, which costs more per file than reading its head.
        let prefix = directory.hasSuffix("/") ? directory : directory + "/"
        let join = directory.isEmpty ? { (name: String) in name } : { (name: String) in prefix + name }
        while start < names.count {
            let batch = names[start..<min(start + batchSize, names.count)]
            let results = Self.decodeConcurrently(Array(batch), in: directoryFD, listing: listing)
            for (name, result) in zip(batch, results) {
                let path = join(name)
                switch result {
                case .success(let report): body(Entry(path: path, report: report))
                case .failure(let reason): onProblem(Problem(path: path, reason: reason.message))
                }
            }
            start += batchSize
        }
    }

    private static func decodeConcurrently(_ names: [String], in directoryFD: Int32, listing: Bool)
        -> [Result<StallReport, StallWatchError>]
    {
        let slots = UnsafeMutableBufferPointer<Result<StallReport, StallWatchError>?>.allocate(capacity: names.count)
        slots.initialize(repeating: nil)
        defer {
            slots.deinitialize()
            slots.deallocate()
        }
        nonisolated(unsafe) let shared = slots
        DispatchQueue.concurrentPerform(iterations: names.count) { index in
            shared[index] = read(names[index], in: directoryFD, listing: listing)
        }
        return slots.map { $0! }
    }

    /// Every readable report, newest `startedAt` first. Loads them all: for large directories prefer
    /// ``forEachReport(onProblem:_:)`` and keep only what you need.
    package func reports(onProblem: (Problem) -> Void) throws(StallWatchError) -> [Entry] {
        var entries: [Entry] = []
        try forEachReport(onProblem: onProblem) { entries.append($0) }
        return entries.sorted { ($0.report.startedAt, $0.report.id) > ($1.report.startedAt, $1.report.id) }
    }

    /// Finds the report whose id is `id` or starts with it. The file named for the id is tried first; then
    /// files whose names start with `stall-<id>`; then every file's id, so renamed files are still found.
    /// Only heads are read to find it (a version 2 file's first bytes), and one file whole. Unreadable files
    /// are skipped silently.
    package func lookup(id: String) throws(StallWatchError) -> Lookup {
        guard !id.isEmpty else { return .notFound }
        let exact = ReportWriter.path(ofReportID: id, in: directory)
        if let report = try? Self.load(path: exact), report.id == id {
            return .found(Entry(path: exact, report: report))
        }
        // Heads first (the first bytes of each candidate), then the one report found, whole.
        var heads = try heads(namedLike: id)
        if heads.isEmpty {
            // No file is named like the id: the heads of all files, so renamed reports are still found.
            try forEachReport(listing: true, onProblem: { _ in }) { entry in
                if entry.report.id.hasPrefix(id) { heads.append(entry) }
            }
        }
        let ids = Set(heads.map(\.report.id))
        guard let found = heads.first(where: { $0.report.id == id }) ?? (ids.count == 1 ? heads.first : nil) else {
            return ids.isEmpty ? .notFound : .ambiguous(ids.sorted())
        }
        guard let report = try? Self.load(path: found.path) else { return .notFound }
        return .found(Entry(path: found.path, report: report))
    }

    /// The listing form of the reports in files whose names start like the file of a report with id `prefix`.
    private func heads(namedLike prefix: String) throws(StallWatchError) -> [Entry] {
        let stem = String(ReportWriter.fileName(forReportID: prefix).dropLast(".json".count))
        let directoryFD = try ReportDirectory.open(directory, forWriting: false)
        defer { close(directoryFD) }
        var names: [String] = []
        ReportDirectory.forEachEntry(directoryFD) { name in
            if name.hasPrefix(stem), name.hasSuffix(".json") { names.append(name) }
        }
        return names.sorted().compactMap { name in
            guard case .success(let report) = Self.read(name, in: directoryFD, listing: true),
                report.id.hasPrefix(prefix)
            else { return nil }
            return Entry(path: (directory as NSString).appendingPathComponent(name), report: report)
        }
    }

    /// Reads and decodes the report file at `path`.
    /// - Throws: `StallWatchError(.report)` with `context["path"]` (and `errno` for I/O errors) naming what
    ///   was wrong, in the same words as a ``Problem``.
    public static func load(path: String) throws(StallWatchError) -> StallReport {
        switch read(path, in: AT_FDCWD) {
        case .success(let report): return report
        case .failure(let reason):
            throw StallWatchError(.report, "\(path): \(reason.message)", context: ["path": path], errno: reason.errno)
        }
    }

    /// Decodes report JSON, classifying what is wrong when it is not a report this build reads.
    /// - Parameter listing: skip the heavy parts (see ``StallReport/listingDecodeKey``).
    package static func decode(_ data: Data, listing: Bool = false) -> Result<StallReport, StallWatchError> {
        let trimmed = data.drop { $0 == 0x20 || $0 == 0x0a || $0 == 0x0d || $0 == 0x09 }
        guard let first = trimmed.first else { return .failure(decodeFailure("empty file")) }
        guard first == UInt8(ascii: "{") || first == UInt8(ascii: "[") else {
            return .failure(decodeFailure("not JSON"))
        }
        do {
            let decoder = StallReport.makeDecoder()
            if listing { decoder.userInfo[StallReport.listingDecodeKey] = true }
            return .success(try decoder.decode(VersionedReport.self, from: data).report)
        } catch let error as Unreadable {
            return .failure(error.error)
        } catch let error as StallWatchError where error.isInvalidReportField {
            return .failure(decodeFailure("not a valid report: \(error.message)"))
        } catch DecodingError.dataCorrupted(let context) where context.codingPath.isEmpty {
            if let reason = ReportNumberCheck.outOfRange(in: data) { return .failure(decodeFailure(reason)) }
            let last = data.reversed().first { $0 != 0x20 && $0 != 0x0a && $0 != 0x0d && $0 != 0x09 }
            let closer = first == UInt8(ascii: "{") ? UInt8(ascii: "}") : UInt8(ascii: "]")
            return .failure(decodeFailure(last == closer ? "invalid JSON" : "truncated JSON (\(data.count) bytes)"))
        } catch DecodingError.typeMismatch(_, let context) where context.codingPath.isEmpty {
            return .failure(decodeFailure("JSON but not a StallWatch report (the top level is not an object)"))
        } catch DecodingError.keyNotFound(let key, let context) {
            return .failure(decodeFailure("not a valid report: missing \"\(dotted(context.codingPath + [key]))\""))
        } catch DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context) {
            return .failure(decodeFailure("not a valid report: wrong type at \"\(dotted(context.codingPath))\""))
        } catch DecodingError.dataCorrupted(let context) {
            return .failure(
                decodeFailure(
                    "not a valid report: bad value at \"\(dotted(context.codingPath))\" (\(context.debugDescription))"))
        } catch {
            return .failure(decodeFailure("not a valid report: \(error)"))
        }
    }

    /// Why a file is not a report this build reads: `StallWatchError` `.report`, with the file's `errno` when
    /// reading it failed.
    private static func decodeFailure(_ text: String, errno: Int32? = nil) -> StallWatchError {
        StallWatchError(.report, text, errno: errno)
    }

    /// Thrown inside the decoder to end it with a reason of its own (caught in ``decode(_:listing:)``).
    private struct Unreadable: Error {
        let error: StallWatchError
        init(_ text: String) { error = ReportStore.decodeFailure(text) }
    }

    // MARK: - Internals

    /// Checks `schemaVersion` before decoding the rest, so foreign and future files get a precise reason.
    private struct VersionedReport: Decodable {
        let report: StallReport
        private enum Keys: String, CodingKey { case schemaVersion }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: Keys.self)
            guard let version = try? container.decode(Int.self, forKey: .schemaVersion) else {
                throw Unreadable("JSON but not a StallWatch report (no integer \"schemaVersion\")")
            }
            guard version <= StallReport.currentSchemaVersion else {
                throw Unreadable(
                    "schemaVersion \(version) is newer than this build reads (\(StallReport.currentSchemaVersion))")
            }
            guard version >= 1 else { throw Unreadable("unsupported schemaVersion \(version)") }
            report = try StallReport(from: decoder)
        }
    }

    private static func dotted(_ path: [any CodingKey]) -> String {
        path.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined().trimmingPrefix(".").description
    }

    /// Report files are small; anything larger than this is not one of ours.
    private static let maximumFileSize = 64 << 20

    private static func read(_ name: String, in directoryFD: Int32, listing: Bool = false)
        -> Result<StallReport, StallWatchError>
    {
        let fd = openat(directoryFD, name, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else {
            let error = errno
            return .failure(decodeFailure(String(cString: strerror(error)), errno: error))
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            return .failure(decodeFailure(String(cString: strerror(errno)), errno: errno))
        }
        guard info.st_mode & S_IFMT == S_IFREG else { return .failure(decodeFailure("not a regular file")) }
        guard Int(info.st_size) <= maximumFileSize else {
            return .failure(decodeFailure("too large for a report (\(info.st_size) bytes)"))
        }
        var data = Data(count: Int(info.st_size))
        var filled = 0
        // A listing of a version 2 file needs only its head: read the first bytes, and the rest only if the
        // head does not end in them.
        var want = listing ? min(data.count, ReportHeadPrefix.readSize) : data.count
        while true {
            while filled < want {
                let count = data.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + filled, want - filled) }
                if count < 0, errno == EINTR { continue }
                if count < 0 { return .failure(decodeFailure(String(cString: strerror(errno)), errno: errno)) }
                if count == 0 { break }
                filled += count
            }
            if listing, let head = ReportHeadPrefix.headDocument(data.prefix(filled)) {
                // The common case read by hand; whatever that reader does not expect goes through JSONDecoder.
                if let fast = head.withUnsafeBytes(ListingHeadReader.listingHead) {
                    return .success(StallReport(listingHead: fast))
                }
                return decode(head, listing: true)
            }
            if want == data.count || filled < want { break }
            want = data.count
        }
        data.count = filled
        return decode(data, listing: listing)
    }
}
