// TaskTableReader: reads the task table another process publishes next to its heartbeat, validated field by field.
import CStallWatchCore
import StallWatch

#if canImport(Glibc)
    import Glibc
#endif

/// The task table of a process at one instant, as read from its published file.
package struct TaskTableSnapshot: Sendable, Equatable {
    package var pid: Int32
    /// The reader's CLOCK_MONOTONIC when the rows were read (the publisher's clock too: same time namespace).
    package var readNanos: UInt64
    /// When the publisher last brought the rows up to date (0: never yet).
    package var publishedNanos: UInt64
    package var counters: TaskTableCounters
    /// Ids of the tasks running on a worker of the pool when the table was last brought up to date.
    package var running: [UInt64]
    /// Tasks in use, in row order.
    package var tasks: [TaskTableEntry]
    /// Rows in use that could not be read coherently or failed validation, and were left out.
    package var rowsSkipped: Int
}

/// Reads `stallwatch.<pid>.tasks` without trusting it: the file belongs to another process and may be stale,
/// truncated, growing, or written by someone hostile. It is never mapped (a truncation would fault the reader); it
/// is read with `pread`, every size, offset, count and code is checked before use, and names are printable text.
package enum TaskTableReader {
    /// The most rows a file may declare (``StallWatchConfiguration/maxTasks``'s bound).
    static let maxCapacity: UInt32 = 4_000_000
    static let headerSize = MemoryLayout<sw_tasks_header>.size
    static let rowSize = MemoryLayout<sw_task_row>.size
    static let chainSize = MemoryLayout<sw_task_chain>.size
    /// Rows read per `pread`.
    static let rowsPerRead = 4096

    /// Reads the table `pid` publishes in `directory`.
    ///
    /// - Throws: `.noSuchProcess` when the process is gone, `.invalidTaskTable` naming the file and the first field
    ///   that failed (or that there is no file), `.permissionDenied` when its `/proc` files cannot be read.
    package static func read(pid: Int32, directory: String) throws(SidecarError) -> TaskTableSnapshot {
        let path = TaskTableRegion.path(directory: directory, pid: pid)
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else {
            let err = errno
            guard ProcDirectory(processID: pid).exists else { throw SidecarError.noSuchProcess(pid: pid) }
            if err == ENOENT {
                throw invalid(
                    path, "file",
                    "pid \(pid) publishes no task table (it does while ConcurrencyWatchdog runs with the heartbeat on "
                        + "and maxTasks above 0)")
            }
            throw invalid(path, "file", "cannot open: \(String(cString: strerror(err)))")
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw invalid(path, "file", "fstat failed") }
        guard info.st_mode & S_IFMT == S_IFREG else { throw invalid(path, "file", "not a regular file") }
        guard info.st_mode & 0o022 == 0 else {
            throw invalid(path, "mode", "writable by group or others (mode \(String(info.st_mode & 0o777, radix: 8)))")
        }
        let headerBytes = try readExactly(fd: fd, offset: 0, count: headerSize, path: path)
        let header = try decodeHeader(headerBytes, path: path, fileSize: UInt64(info.st_size))
        guard header.pid == pid else { throw invalid(path, "pid", "describes pid \(header.pid), expected \(pid)") }
        try HeartbeatReader.checkPublisher(
            pid: pid, startTimeTicks: header.start_time_ticks, path: path, fileOwner: info.st_uid,
            inode: UInt64(info.st_ino), invalid: invalid)
        let now = sw_monotonic_ns()
        let published = header.published_ns
        guard published <= now &+ 1_000_000_000 else {
            throw invalid(path, "published_ns", "lies in the future (another time namespace?)")
        }
        var snapshot = TaskTableSnapshot(
            pid: pid, readNanos: now, publishedNanos: published, counters: TaskTableCounters(header: header),
            running: running(of: header), tasks: [], rowsSkipped: 0)
        var first = 0
        let highWater = Int(header.high_water)
        while first < highWater {
            let count = min(rowsPerRead, highWater - first)
            let offset = Int(header.rows_offset) + first * rowSize
            let bytes = try readExactly(fd: fd, offset: offset, count: count * rowSize, path: path)
            for index in 0..<count {
                let row = bytes.withUnsafeBytes {
                    $0.loadUnaligned(fromByteOffset: index * rowSize, as: sw_task_row.self)
                }
                guard row.state != UInt8(SW_TASK_FREE) || row.sequence & 1 != 0 else { continue }
                let entry = readRow(row, fd: fd, header: header, rowOffset: offset + index * rowSize, now: now)
                if let entry { snapshot.tasks.append(entry) } else { snapshot.rowsSkipped += 1 }
            }
            first += count
        }
        return snapshot
    }

    // MARK: Validation

    /// Checks every header field that needs no system access. Pure: the hostile-file tests drive it.
    ///
    /// - Throws: `.invalidTaskTable` naming the first bad field.
    static func decodeHeader(_ bytes: [UInt8], path: String, fileSize: UInt64) throws(SidecarError) -> sw_tasks_header {
        guard bytes.count == headerSize else {
            throw invalid(path, "size", "\(fileSize) bytes: shorter than a header (\(headerSize))")
        }
        let header = bytes.withUnsafeBytes { $0.loadUnaligned(as: sw_tasks_header.self) }
        guard header.magic == SW_TASKS_MAGIC else {
            throw invalid(path, "magic", "0x\(String(header.magic, radix: 16)) is not a StallWatch task table")
        }
        guard header.version == SW_TASKS_VERSION else {
            throw invalid(path, "version", "version \(header.version), this reader knows \(SW_TASKS_VERSION)")
        }
        guard Int(header.header_size) == headerSize else {
            throw invalid(path, "header_size", "\(header.header_size), expected \(headerSize)")
        }
        guard Int(header.row_size) == rowSize else {
            throw invalid(path, "row_size", "\(header.row_size), expected \(rowSize)")
        }
        guard Int(header.chain_size) == chainSize else {
            throw invalid(path, "chain_size", "\(header.chain_size), expected \(chainSize)")
        }
        guard (1...maxCapacity).contains(header.capacity) else {
            throw invalid(path, "capacity", "\(header.capacity) rows is outside 1 … \(maxCapacity)")
        }
        guard header.chain_capacity == UInt32(SW_TASKS_CHAINS) else {
            throw invalid(path, "chain_capacity", "\(header.chain_capacity), expected \(SW_TASKS_CHAINS)")
        }
        guard header.chains_offset == UInt64(headerSize) else {
            throw invalid(path, "chains_offset", "\(header.chains_offset), expected \(headerSize)")
        }
        let rowsOffset = UInt64(headerSize) + UInt64(header.chain_capacity) * UInt64(chainSize)
        guard header.rows_offset == rowsOffset else {
            throw invalid(path, "rows_offset", "\(header.rows_offset), expected \(rowsOffset)")
        }
        let expectedSize = rowsOffset + UInt64(header.capacity) * UInt64(rowSize)
        guard header.file_size == expectedSize, fileSize == expectedSize else {
            throw invalid(
                path, "file_size",
                "header says \(header.file_size) bytes, the file is \(fileSize), \(header.capacity) rows take "
                    + "\(expectedSize)")
        }
        guard header.pid > 0 else { throw invalid(path, "pid", "\(header.pid) is not a process id") }
        guard header.start_time_ticks > 0 else { throw invalid(path, "start_time_ticks", "is 0") }
        guard header.high_water <= header.capacity else {
            throw invalid(path, "high_water", "\(header.high_water) rows, past the capacity \(header.capacity)")
        }
        guard header.live <= header.high_water else {
            throw invalid(path, "live", "\(header.live) rows in use, past the high water \(header.high_water)")
        }
        return header
    }

    /// One row, checked: its sequence read again after the copy (the writer may be changing it), then decoded by
    /// ``TaskTableEntry`` (codes, times, name); its chain, when it names one, read and checked the same way.
    private static func readRow(_ first: sw_task_row, fd: Int32, header: sw_tasks_header, rowOffset: Int, now: UInt64)
        -> TaskTableEntry?
    {
        var row = first
        for _ in 0..<4 {
            var again: UInt32 = 0
            guard pread(fd, &again, 4, off_t(rowOffset)) == 4 else { return nil }
            if row.sequence & 1 == 0, again == row.sequence { break }
            guard pread(fd, &row, rowSize, off_t(rowOffset)) == rowSize else { return nil }
        }
        guard row.sequence & 1 == 0, row.state != UInt8(SW_TASK_FREE) else { return nil }
        return TaskTableEntry(row: row, now: now) { index in
            guard index >= 1, index <= header.chain_capacity else { return nil }
            let offset = Int(header.chains_offset) + Int(index - 1) * chainSize
            var chain = sw_task_chain()
            guard pread(fd, &chain, chainSize, off_t(offset)) == chainSize, chain.sequence & 1 == 0 else { return nil }
            return chain
        }
    }

    private static func running(of header: sw_tasks_header) -> [UInt64] {
        withUnsafeBytes(of: header.running) { raw in raw.bindMemory(to: UInt64.self).filter { $0 != 0 } }
    }

    private static func readExactly(fd: Int32, offset: Int, count: Int, path: String) throws(SidecarError)
        -> [UInt8]
    {
        var bytes = [UInt8](repeating: 0, count: count)
        var total = 0
        while total < count {
            let n = bytes.withUnsafeMutableBytes {
                pread(fd, $0.baseAddress! + total, count - total, off_t(offset + total))
            }
            if n < 0 {
                if errno == EINTR { continue }
                throw invalid(path, "file", "read failed: \(String(cString: strerror(errno)))")
            }
            if n == 0 { break }
            total += n
        }
        guard total == count else { throw invalid(path, "size", "truncated while reading (\(offset + total) bytes)") }
        return bytes
    }

    static func invalid(_ path: String, _ field: String, _ why: String) -> SidecarError {
        SidecarError(
            .invalidTaskTable, "task table \(path): \(field): \(why)", context: ["path": path, "field": field])
    }
}
