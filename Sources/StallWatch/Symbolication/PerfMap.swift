// PerfMap: names of JIT-compiled code from /tmp/perf-<pid>.map, the file runtimes write for profilers.
import Foundation

/// The symbol map a JIT runtime writes for perf (`node --perf-basic-prof`, the JVM's perf-map agent, CPython's
/// `-X perf`, LuaJIT …): one line per code region, `START SIZE name`, addresses in hex. Code in it lives in
/// anonymous memory that no ELF image covers.
///
/// Re-read when the file grows (runtimes append as they compile); lookups are a binary search.
struct PerfMap {
    package struct Entry {
        var start: UInt64
        var size: UInt64
        var name: String
    }

    let path: String
    private var entries: [Entry] = []
    private var loadedSize: Int = -1

    init(processID: Int32) {
        path = Self.path(processID: processID)
    }

    static func path(processID: Int32) -> String { "/tmp/perf-\(processID).map" }

    /// The map's size in bytes; nil when the process writes none.
    static func size(processID: Int32) -> UInt64? {
        var info = stat()
        guard stat(path(processID: processID), &info) == 0 else { return nil }
        return UInt64(info.st_size)
    }

    /// The region containing `address` and the offset into it; nil when no map or no region has it.
    mutating func lookup(_ address: UInt64) -> (name: String, offset: UInt64)? {
        reloadIfGrown()
        var low = 0
        var high = entries.count
        while low < high {
            let mid = (low + high) / 2
            if entries[mid].start <= address { low = mid + 1 } else { high = mid }
        }
        guard low > 0 else { return nil }
        // Later lines win where regions were reused: search back over a few overlapping candidates.
        for entry in entries[max(0, low - 4)..<low].reversed() where address < entry.start &+ entry.size {
            return (entry.name, address - entry.start)
        }
        return nil
    }

    /// Parses the map's text (lines `START SIZE name`).
    static func parse(_ text: String) -> [Entry] {
        var result: [Entry] = []
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: " ", maxSplits: 2)
            guard parts.count == 3, let start = UInt64(hex: parts[0]), let size = UInt64(hex: parts[1]) else {
                continue
            }
            result.append(Entry(start: start, size: size, name: String(parts[2])))
        }
        return result.enumerated().sorted { ($0.element.start, $0.offset) < ($1.element.start, $1.offset) }
            .map(\.element)
    }

    private mutating func reloadIfGrown() {
        var info = stat()
        guard stat(path, &info) == 0 else {
            entries = []
            loadedSize = -1
            return
        }
        let size = Int(info.st_size)
        guard size != loadedSize, let data = FileManager.default.contents(atPath: path) else { return }
        entries = Self.parse(String(decoding: data, as: UTF8.self))
        loadedSize = size
    }
}

extension UInt64 {
    fileprivate init?(hex: Substring) {
        var digits = hex
        if digits.hasPrefix("0x") { digits = digits.dropFirst(2) }
        self.init(digits, radix: 16)
    }
}
