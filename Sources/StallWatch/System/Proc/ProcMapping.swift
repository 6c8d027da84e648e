// ProcMapping: one line of /proc/<pid>/maps — an address range, its permissions and what backs it.
import CStallWatchCore

#if canImport(Glibc)
    import Glibc
#endif

/// One mapping of a process (proc(5) `maps`): `start-end perms offset dev inode path`.
package struct ProcMapping: Sendable, Equatable {
    var start: UInt64
    var end: UInt64
    var isReadable: Bool
    var isWritable: Bool
    var isExecutable: Bool
    /// The file offset of `start`.
    var offset: UInt64
    /// The backing file's inode (0 for anonymous memory and the vDSO).
    package var inode: UInt64
    /// The backing file's path (" (deleted)" stripped), a pseudo-path (`[stack]`, `[vdso]`, `[heap]`), or nil for
    /// anonymous memory.
    var path: String?

    var range: Range<UInt64> { start..<max(start, end) }
    func contains(_ address: UInt64) -> Bool { start <= address && address < end }

    /// Every well-formed line of `text`, in the file's (address) order; malformed lines are skipped. The bytes are
    /// parsed in C (``sw_parse_maps``): a process of a thousand threads has thousands of lines, read again at each
    /// stall on the watching thread, and Swift's generic collection code in an unoptimised build took 20 µs a line.
    static func all(in text: String) -> [ProcMapping] {
        var text = text
        return text.withUTF8 { bytes in
            guard let base = bytes.baseAddress else { return [] }
            var lines = [sw_map_line](repeating: sw_map_line(), count: bytes.count / 40 + 16)
            var count = lines.withUnsafeMutableBufferPointer {
                sw_parse_maps(base, bytes.count, $0.baseAddress, $0.count)
            }
            if count > lines.count {
                lines = [sw_map_line](repeating: sw_map_line(), count: count)
                count = lines.withUnsafeMutableBufferPointer {
                    sw_parse_maps(base, bytes.count, $0.baseAddress, $0.count)
                }
            }
            var previousPath: (offset: UInt32, length: UInt32, path: String)?
            return lines.prefix(min(count, lines.count)).map { line in
                var mapping = ProcMapping(
                    start: line.start, end: line.end, isReadable: line.perms & UInt8(SW_MAP_READ) != 0,
                    isWritable: line.perms & UInt8(SW_MAP_WRITE) != 0,
                    isExecutable: line.perms & UInt8(SW_MAP_EXEC) != 0,
                    offset: line.offset, inode: line.inode, path: nil)
                guard line.path_length > 0 else { return mapping }
                let range = Int(line.path_offset)..<Int(line.path_offset + line.path_length)
                // The mappings of one file are consecutive lines with the same path: one String for them all.
                if let previous = previousPath, previous.length == line.path_length,
                    memcmp(base + Int(previous.offset), base + range.lowerBound, range.count) == 0
                {
                    mapping.path = previous.path
                } else {
                    let path = String(decoding: UnsafeBufferPointer(rebasing: bytes[range]), as: UTF8.self)
                    mapping.path = path
                    previousPath = (line.path_offset, line.path_length, path)
                }
                return mapping
            }
        }
    }

    init(
        start: UInt64, end: UInt64, isReadable: Bool, isWritable: Bool, isExecutable: Bool, offset: UInt64,
        inode: UInt64, path: String?
    ) {
        (self.start, self.end, self.offset, self.inode, self.path) = (start, end, offset, inode, path)
        (self.isReadable, self.isWritable, self.isExecutable) = (isReadable, isWritable, isExecutable)
    }

    /// Parses one line of the file.
    init?(line: String) {
        guard let mapping = Self.all(in: line).first else { return nil }
        self = mapping
    }
}
