// ProcMapping: one line of /proc/<pid>/maps — an address range, its permissions and what backs it.

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

    /// Every well-formed line of `text`, in the file's (address) order; malformed lines are skipped.
    static func all(in text: String) -> [ProcMapping] {
        var mappings: [ProcMapping] = []
        for line in text.utf8.split(separator: UInt8(ascii: "\n")) {
            if let mapping = ProcMapping(line: line) { mappings.append(mapping) }
        }
        return mappings
    }

    /// Parses one line, byte by byte (a process of a thousand threads has thousands of lines).
    init?(line: Substring.UTF8View.SubSequence) {
        var fields: [Substring.UTF8View.SubSequence] = []
        var rest = line[...]
        for _ in 0..<5 {
            let trimmed = rest.drop { $0 == UInt8(ascii: " ") }
            guard let space = trimmed.firstIndex(of: UInt8(ascii: " ")) else {
                // The last field of a line without a path.
                guard fields.count == 4, !trimmed.isEmpty else { return nil }
                fields.append(trimmed)
                rest = trimmed[trimmed.endIndex...]
                break
            }
            fields.append(trimmed[..<space])
            rest = trimmed[space...]
        }
        let range = fields[0].split(separator: UInt8(ascii: "-"))
        guard range.count == 2, let start = Self.hex(range[0]), let end = Self.hex(range[1]),
            let offset = Self.hex(fields[2]), fields[1].count >= 3
        else { return nil }
        self.start = start
        self.end = end
        self.offset = offset
        let perms = Array(fields[1])
        isReadable = perms[0] == UInt8(ascii: "r")
        isWritable = perms[1] == UInt8(ascii: "w")
        isExecutable = perms[2] == UInt8(ascii: "x")
        var inode: UInt64 = 0
        for digit in fields[4] {
            guard digit >= UInt8(ascii: "0"), digit <= UInt8(ascii: "9") else { break }
            inode = inode &* 10 &+ UInt64(digit - UInt8(ascii: "0"))
        }
        self.inode = inode
        let pathBytes = rest.drop { $0 == UInt8(ascii: " ") }
        if pathBytes.isEmpty {
            path = nil
        } else {
            var path = String(decoding: pathBytes, as: UTF8.self)
            if path.hasSuffix(" (deleted)") { path.removeLast(" (deleted)".count) }
            self.path = path
        }
    }

    private static func hex(_ digits: Substring.UTF8View.SubSequence) -> UInt64? {
        guard !digits.isEmpty, digits.count <= 16 else { return nil }
        var value: UInt64 = 0
        for byte in digits {
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: return nil
            }
            value = value << 4 | UInt64(digit)
        }
        return value
    }
}
