// ImageMap: the ELF images a process has mapped, parsed from /proc/<pid>/maps.
#if canImport(Glibc)
    import Glibc
#endif

/// The images (executable, shared objects, the vDSO) mapped into a process, and which one an address falls in.
///
/// Built from `/proc/<pid>/maps` without opening any ELF file, so it works in every ``SymbolicationMode``.
/// An image's load base is the start of its first mapping minus that mapping's file offset: the address at
/// which file offset 0 would lie.
public struct ImageMap: Sendable, Equatable {
    /// One mapped image.
    public struct Image: Sendable, Equatable, Hashable {
        /// The mapped file's path (" (deleted)" stripped), or `[vdso]`.
        public var path: String
        /// The address of file offset 0.
        public var base: UInt64
        /// Bytes from `base` to the end of the image's last mapping.
        public var size: UInt64
        /// Has an executable mapping: a loaded image rather than a data mmap of the file (libelf maps ELF files
        /// it reads, and those mappings carry the same path).
        public var isLoaded: Bool = false
        /// The mapped file's inode as the kernel reports it (0 for the vDSO): tells the file a process really
        /// maps from a newer file that has since replaced it at the same path.
        public var inode: UInt64 = 0
        /// The first mapping's bounds, which name the mapped file itself in `/proc/<pid>/map_files/`.
        public var firstMapping: Range<UInt64> = 0..<0
    }

    struct Mapping: Sendable, Equatable {
        var start: UInt64
        var end: UInt64
        var image: Int
    }

    /// The images in address order of their first mapping.
    public private(set) var images: [Image] = []
    /// Every file-backed mapping, sorted by start, for the binary search in `image(containing:)`.
    private var mappings: [Mapping] = []

    /// Reads `/proc/<processID>/maps`.
    /// - Throws: `StallWatchError(.systemCall)` when the file cannot be read (no such process, no permission).
    public init(processID: Int32) throws(StallWatchError) {
        let path = "/proc/\(processID)/maps"
        self.init(parsing: try ProcFile.read(path))
    }

    /// Parses text in the format of `/proc/<pid>/maps`; malformed lines are ignored.
    public init(parsing text: String) {
        var current: [String: Int] = [:]
        for line in text.utf8.split(separator: UInt8(ascii: "\n")) {
            guard let entry = Self.parse(line) else { continue }
            var index = current[entry.path]
            // A second mapping of a file at offset 0 is a second load of it (or a data mmap): a new image.
            if index == nil || entry.offset == 0 {
                images.append(
                    Image(
                        path: entry.path, base: entry.start &- entry.offset, size: 0, inode: entry.inode,
                        firstMapping: entry.start..<max(entry.start, entry.end)))
                index = images.count - 1
                current[entry.path] = index
            }
            let i = index!
            if entry.end > images[i].base { images[i].size = max(images[i].size, entry.end - images[i].base) }
            if entry.executable { images[i].isLoaded = true }
            mappings.append(Mapping(start: entry.start, end: entry.end, image: i))
        }
        mappings.sort { $0.start < $1.start }
    }

    /// The image with a mapping that contains `address`, or nil for anonymous memory and unmapped addresses.
    public func image(containing address: UInt64) -> Image? {
        var low = 0
        var high = mappings.count
        while low < high {
            let mid = (low + high) / 2
            if mappings[mid].end <= address { low = mid + 1 } else { high = mid }
        }
        guard low < mappings.count, mappings[low].start <= address else { return nil }
        return images[mappings[low].image]
    }

    /// The image whose path is `path` (its first load; a data mmap of the same file only if nothing is loaded).
    public func image(path: String) -> Image? {
        images.first { $0.path == path && $0.isLoaded } ?? images.first { $0.path == path }
    }

    /// One line: `start-end perms offset dev inode path`; only file-backed mappings and the vDSO count.
    private static func parse(_ line: Substring.UTF8View.SubSequence) -> (
        start: UInt64, end: UInt64, offset: UInt64, executable: Bool, inode: UInt64, path: String
    )? {
        var fields: [Substring.UTF8View.SubSequence] = []
        var rest = line[...]
        for _ in 0..<5 {
            let trimmed = rest.drop { $0 == UInt8(ascii: " ") }
            guard let space = trimmed.firstIndex(of: UInt8(ascii: " ")) else { return nil }
            fields.append(trimmed[..<space])
            rest = trimmed[space...]
        }
        let pathBytes = rest.drop { $0 == UInt8(ascii: " ") }
        guard let first = pathBytes.first, first == UInt8(ascii: "/") || pathBytes.elementsEqual("[vdso]".utf8)
        else { return nil }
        let range = fields[0].split(separator: UInt8(ascii: "-"))
        guard range.count == 2, let start = hex(range[0]), let end = hex(range[1]), let offset = hex(fields[2])
        else { return nil }
        var path = String(decoding: pathBytes, as: UTF8.self)
        if path.hasSuffix(" (deleted)") { path.removeLast(" (deleted)".count) }
        var inode: UInt64 = 0
        for digit in fields[4] {
            guard digit >= UInt8(ascii: "0"), digit <= UInt8(ascii: "9") else { break }
            inode = inode &* 10 &+ UInt64(digit - UInt8(ascii: "0"))
        }
        return (start, end, offset, fields[1].contains(UInt8(ascii: "x")), inode, path)
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
