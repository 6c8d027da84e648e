// The published task table as a sidecar reads it: every header field checked and named, hostile rows left out,
// names made printable, no file mapped, and no damaged file that crashes the reader.
import CStallWatchCore
import Foundation
import StallWatchTestSupport
import Testing

@testable import StallWatch
@testable import StallWatchSidecar

#if canImport(Glibc)
    import Glibc
#endif

@Suite(.offPool) struct TaskTableReaderTests {
    static let capacity: UInt32 = 8

    /// A valid header for this process, `capacity` rows, `highWater` of them possibly in use.
    static func header(highWater: UInt32 = 0, live: UInt32 = 0) -> sw_tasks_header {
        var h = sw_tasks_header()
        h.magic = SW_TASKS_MAGIC
        h.version = SW_TASKS_VERSION
        h.header_size = UInt32(MemoryLayout<sw_tasks_header>.size)
        h.row_size = UInt32(MemoryLayout<sw_task_row>.size)
        h.capacity = capacity
        h.chain_size = UInt32(MemoryLayout<sw_task_chain>.size)
        h.chain_capacity = UInt32(SW_TASKS_CHAINS)
        h.chains_offset = UInt64(h.header_size)
        h.rows_offset = h.chains_offset + UInt64(h.chain_capacity) * UInt64(h.chain_size)
        h.file_size = h.rows_offset + UInt64(capacity) * UInt64(h.row_size)
        h.pid = getpid()
        h.start_time_ticks = HeartbeatPublisher.startTimeTicks(pid: getpid()) ?? 0
        h.published_ns = sw_monotonic_ns()
        h.high_water = highWater
        h.live = live
        return h
    }

    /// A suspended task's row, last run `agoNanos` before now.
    static func row(id: UInt64, agoNanos: UInt64 = 2_000_000_000, name: String = "") -> sw_task_row {
        var r = sw_task_row()
        let now = sw_monotonic_ns()
        r.task_id = id
        r.state = UInt8(SW_TASK_SUSPENDED)
        r.first_seen_ns = now - agoNanos - 1_000_000
        r.last_start_ns = now - agoNanos - 500_000
        r.last_end_ns = now - agoNanos
        r.since_ns = r.last_end_ns
        r.runs = 3
        r.thread_id = 42
        withUnsafeMutableBytes(of: &r.name) { raw in
            for (index, byte) in name.utf8.prefix(raw.count - 1).enumerated() { raw[index] = byte }
        }
        return r
    }

    static func bytes(_ header: sw_tasks_header, rows: [sw_task_row]) -> [UInt8] {
        var file = [UInt8](repeating: 0, count: Int(header.file_size == 0 ? 1 : header.file_size))
        withUnsafeBytes(of: header) { file.replaceSubrange(0..<$0.count, with: $0) }
        for (index, row) in rows.enumerated() {
            let at = Int(header.rows_offset) + index * MemoryLayout<sw_task_row>.size
            withUnsafeBytes(of: row) { file.replaceSubrange(at..<at + $0.count, with: $0) }
        }
        return file
    }

    /// A published file: written 0600 under the name this process would publish, and mapped by this process (as its
    /// publisher maps it) until `body` returns.
    static func withPublished<T>(
        _ content: [UInt8], map: Bool = true, _ body: (String) throws -> T
    ) throws -> T {
        let directory = SidecarFixtures.temporaryDirectory("task-table-read")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = TaskTableRegion.path(directory: directory, pid: getpid())
        let fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0o600)
        try #require(fd >= 0)
        defer { close(fd) }
        try #require(content.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } == content.count)
        var mapping: UnsafeMutableRawPointer?
        if map {
            mapping = mmap(nil, content.count, PROT_READ, MAP_SHARED, fd, 0)
            try #require(mapping != MAP_FAILED)
        }
        defer { if let mapping { munmap(mapping, content.count) } }
        return try body(directory)
    }

    static func expectInvalid(_ field: String, _ body: () throws -> Void) {
        do {
            try body()
            Issue.record("no error; expected one naming \(field)")
        } catch let error as SidecarError {
            #expect(error.code == .invalidTaskTable)
            #expect(error.context["field"] == field, "\(error.message)")
        } catch {
            Issue.record("unexpected \(error)")
        }
    }

    @Test func aPublishedTableIsReadWithHostileRowsLeftOutAndNamesMadePrintable() throws {
        var odd = Self.row(id: 11)
        odd.sequence = 3  // the writer is in the middle of it
        var badState = Self.row(id: 12)
        badState.state = 9
        let future = Self.row(id: 13, agoNanos: 0)
        var futureRow = future
        futureRow.since_ns = sw_monotonic_ns() + 3_600_000_000_000
        var badChain = Self.row(id: 14)
        badChain.chain = UInt32(SW_TASKS_CHAINS) + 1
        var unordered = Self.row(id: 15)
        unordered.first_seen_ns = unordered.last_end_ns + 1
        let good = Self.row(id: 10, name: "reply\u{1b}]0;owned\u{07}\nwait")
        let rows = [good, odd, badState, futureRow, badChain, unordered, sw_task_row()]
        let file = Self.bytes(Self.header(highWater: UInt32(rows.count), live: 6), rows: rows)
        let snapshot = try Self.withPublished(file) { directory in
            try TaskTableReader.read(pid: getpid(), directory: directory)
        }
        #expect(snapshot.tasks.map(\.id) == [10])
        #expect(snapshot.rowsSkipped == 5)
        let task = try #require(snapshot.tasks.first)
        #expect(task.state == .suspended && task.runs == 3 && task.threadID == 42)
        let name = try #require(task.name)
        #expect(!name.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7f })
        #expect(name.hasPrefix("reply") && name.hasSuffix("wait"))
        // Two seconds suspended, by the reader's clock.
        #expect((1_900_000_000...2_900_000_000).contains(task.age(at: snapshot.readNanos)))
        #expect(snapshot.counters.capacity == Int(Self.capacity) && snapshot.counters.live == 6)
    }

    /// Each header field, made wrong in turn: the error names that field.
    @Test(arguments: [
        "magic", "version", "header_size", "row_size", "chain_size", "capacity", "chain_capacity", "chains_offset",
        "rows_offset", "file_size", "pid", "start_time_ticks", "high_water", "live",
    ])
    func eachHeaderFieldIsCheckedAndNamed(field: String) throws {
        var h = Self.header(highWater: 2, live: 1)
        switch field {
        case "magic": h.magic ^= 1
        case "version": h.version += 1
        case "header_size": h.header_size += 8
        case "row_size": h.row_size -= 8
        case "chain_size": h.chain_size = 0
        case "capacity": h.capacity = 4_000_001
        case "chain_capacity": h.chain_capacity = 1
        case "chains_offset": h.chains_offset = 0
        case "rows_offset": h.rows_offset = 1 << 40
        case "file_size": h.file_size += 112
        case "pid": h.pid = -1
        case "start_time_ticks": h.start_time_ticks = 0
        case "high_water": h.high_water = Self.capacity + 1
        case "live": h.live = 3
        default: Issue.record("no mutation for \(field)")
        }
        let bytes = withUnsafeBytes(of: h) { Array($0) }
        let size = Self.header().file_size
        Self.expectInvalid(field) { _ = try TaskTableReader.decodeHeader(bytes, path: "t", fileSize: size) }
    }

    @Test func aFileItsNamedProcessDoesNotMapIsRefused() throws {
        let file = Self.bytes(Self.header(highWater: 1, live: 1), rows: [Self.row(id: 1)])
        try Self.withPublished(file, map: false) { directory in
            Self.expectInvalid("pid") { _ = try TaskTableReader.read(pid: getpid(), directory: directory) }
        }
    }

    @Test func aFileOfAnEarlierProcessWithThisPidIsRefused() throws {
        var h = Self.header()
        h.start_time_ticks += 1
        try Self.withPublished(Self.bytes(h, rows: [])) { directory in
            Self.expectInvalid("start_time_ticks") { _ = try TaskTableReader.read(pid: getpid(), directory: directory) }
        }
    }

    @Test func aTruncatedFileIsRefusedByItsSize() throws {
        let file = Self.bytes(Self.header(highWater: 1, live: 1), rows: [Self.row(id: 1)])
        try Self.withPublished(Array(file.dropLast(100))) { directory in
            Self.expectInvalid("file_size") { _ = try TaskTableReader.read(pid: getpid(), directory: directory) }
        }
    }

    @Test func aSymlinkIsNotFollowed() throws {
        let file = Self.bytes(Self.header(), rows: [])
        try Self.withPublished(file) { directory in
            let path = TaskTableRegion.path(directory: directory, pid: getpid())
            try FileManager.default.moveItem(atPath: path, toPath: path + ".real")
            try FileManager.default.createSymbolicLink(atPath: path, withDestinationPath: path + ".real")
            Self.expectInvalid("file") { _ = try TaskTableReader.read(pid: getpid(), directory: directory) }
        }
    }

    @Test func aProcessThatPublishesNoTableIsToldApartFromOneThatIsGone() throws {
        let directory = SidecarFixtures.temporaryDirectory("task-table-none")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        do {
            _ = try TaskTableReader.read(pid: getpid(), directory: directory)
            Issue.record("read a table nobody published")
        } catch {
            #expect(error.code == .invalidTaskTable && error.message.contains("publishes no task table"))
        }
        do {
            _ = try TaskTableReader.read(pid: Int32.max, directory: directory)
            Issue.record("read a table of a process that does not exist")
        } catch {
            #expect(error.code == .noSuchProcess)
        }
    }

    /// Random bytes over a valid file (header and rows): every read ends in a snapshot whose rows passed the checks,
    /// or in a named error; never a crash.
    @Test func damagedFilesNeverCrashTheReader() throws {
        var random = SeededGenerator()
        let rows = (1...Int(Self.capacity)).map { Self.row(id: UInt64($0), name: "task \($0)") }
        let valid = Self.bytes(Self.header(highWater: Self.capacity, live: Self.capacity), rows: rows)
        let rowsStart = Int(Self.header().rows_offset)
        for _ in 0..<300 {
            var file = valid
            for _ in 0..<Int.random(in: 1...8, using: &random) {
                // Mostly the header and the rows, where the fields are; sometimes anywhere.
                let at =
                    Bool.random(using: &random)
                    ? Int.random(in: 0..<MemoryLayout<sw_tasks_header>.size, using: &random)
                    : Int.random(in: rowsStart..<file.count, using: &random)
                file[at] = UInt8.random(in: 0...255, using: &random)
            }
            try Self.withPublished(file) { directory in
                do throws(SidecarError) {
                    let snapshot = try TaskTableReader.read(pid: getpid(), directory: directory)
                    #expect(snapshot.tasks.count + snapshot.rowsSkipped <= Int(Self.capacity))
                    for task in snapshot.tasks {
                        #expect(!(task.name ?? "").unicodeScalars.contains { $0.value < 0x20 })
                    }
                } catch {
                    #expect(error.code == .invalidTaskTable)
                }
            }
        }
    }
}
