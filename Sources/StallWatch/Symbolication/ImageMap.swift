// ImageMap: the ELF images a process has mapped, parsed from /proc/<pid>/maps.
#if canImport(Glibc)
    import Glibc
#endif

/// The images (executable, shared objects, the vDSO) mapped into a process, and which one an address falls in.
///
/// Built from `/proc/<pid>/maps` without opening any ELF file, so it works in every ``SymbolicationMode``.
/// An image's load base is the start of its first mapping minus that mapping's file offset: the address at
/// which file offset 0 would lie.
struct ImageMap: Sendable, Equatable {
    /// One mapped image.
    struct Image: Sendable, Equatable, Hashable {
        /// The mapped file's path (" (deleted)" stripped), or `[vdso]`.
        var path: String
        /// The address of file offset 0.
        var base: UInt64
        /// Bytes from `base` to the end of the image's last mapping.
        var size: UInt64
        /// Has an executable mapping: a loaded image rather than a data mmap of the file (libelf maps ELF files
        /// it reads, and those mappings carry the same path).
        var isLoaded: Bool = false
        /// The mapped file's inode as the kernel reports it (0 for the vDSO): tells the file a process really
        /// maps from a newer file that has since replaced it at the same path.
        var inode: UInt64 = 0
        /// The first mapping's bounds, which name the mapped file itself in `/proc/<pid>/map_files/`.
        var firstMapping: Range<UInt64> = 0..<0
    }

    struct Mapping: Sendable, Equatable {
        var start: UInt64
        var end: UInt64
        var image: Int
    }

    /// The images in address order of their first mapping.
    private(set) var images: [Image] = []
    /// Every file-backed mapping, sorted by start, for the binary search in `image(containing:)`.
    private var mappings: [Mapping] = []

    /// Reads `/proc/<processID>/maps`.
    /// - Throws: `StallWatchError(.systemCall)` when the file cannot be read (no such process, no permission).
    init(processID: Int32) throws(StallWatchError) {
        let path = ProcDirectory(processID: processID).path + "/maps"
        self.init(parsing: try ProcFile.read(path))
    }

    /// Parses text in the format of `/proc/<pid>/maps`; malformed lines are ignored.
    init(parsing text: String) {
        self.init(mappings: ProcMapping.all(in: text))
    }

    /// The images of `all` (a process's mappings in address order): only file-backed mappings and the vDSO.
    init(mappings all: [ProcMapping]) {
        var current: [String: Int] = [:]
        for entry in all {
            guard let path = entry.path, path.hasPrefix("/") || path == "[vdso]" else { continue }
            var index = current[path]
            // A second mapping of a file at offset 0 is a second load of it (or a data mmap): a new image.
            if index == nil || entry.offset == 0 {
                images.append(
                    Image(
                        path: path, base: entry.start &- entry.offset, size: 0, inode: entry.inode,
                        firstMapping: entry.range))
                index = images.count - 1
                current[path] = index
            }
            let i = index!
            if entry.end > images[i].base { images[i].size = max(images[i].size, entry.end - images[i].base) }
            if entry.isExecutable { images[i].isLoaded = true }
            mappings.append(Mapping(start: entry.start, end: entry.end, image: i))
        }
        mappings.sort { $0.start < $1.start }
    }

    /// The image with a mapping that contains `address`, or nil for anonymous memory and unmapped addresses.
    func image(containing address: UInt64) -> Image? {
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
    func image(path: String) -> Image? {
        images.first { $0.path == path && $0.isLoaded } ?? images.first { $0.path == path }
    }
}
