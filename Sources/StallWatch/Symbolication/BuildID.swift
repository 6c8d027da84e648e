// BuildID: reads the GNU build-id note of an ELF file, the key that matches a binary to its debug info.
#if canImport(Glibc)
    import Glibc
#endif

/// The GNU build-id (`NT_GNU_BUILD_ID` in a `PT_NOTE` segment) of ELF files, as lowercase hex.
///
/// Only the ELF header, the program headers and the note segments are read (a few hundred bytes), never the
/// whole file. 64-bit little-endian ELF only (the platforms StallWatch supports); anything else yields nil.
package enum BuildID {
    /// The build-id of the ELF file at `path`, or nil when the file cannot be read, is not ELF or has no note.
    package static func ofFile(atPath path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        return ofFile(descriptor: fd)
    }

    /// The build-id of the ELF file open as `fd` (read with `pread`, so the file position does not move), or nil.
    package static func ofFile(descriptor fd: Int32) -> String? {
        guard let header = pread(fd, offset: 0, count: 64), header.count == 64,
            header[0] == 0x7f, header[1] == UInt8(ascii: "E"), header[2] == UInt8(ascii: "L"),
            header[3] == UInt8(ascii: "F"), header[4] == 2 /* ELFCLASS64 */, header[5] == 1 /* ELFDATA2LSB */
        else { return nil }
        let programHeaderOffset = header.loadLE(UInt64.self, at: 32)
        let entrySize = Int(header.loadLE(UInt16.self, at: 54))
        let entryCount = Int(header.loadLE(UInt16.self, at: 56))
        guard entrySize >= 56, entryCount > 0, entryCount < 4096,
            let table = pread(fd, offset: programHeaderOffset, count: entrySize * entryCount),
            table.count == entrySize * entryCount
        else { return nil }
        for index in 0..<entryCount {
            let base = index * entrySize
            guard table.loadLE(UInt32.self, at: base) == 4 /* PT_NOTE */ else { continue }
            let offset = table.loadLE(UInt64.self, at: base + 8)
            let size = table.loadLE(UInt64.self, at: base + 32)
            let align = table.loadLE(UInt64.self, at: base + 48)
            guard size > 0, size <= 1 << 16, let notes = pread(fd, offset: offset, count: Int(size)) else { continue }
            if let id = buildID(inNotes: notes, alignment: align == 8 ? 8 : 4) { return id }
        }
        return nil
    }

    /// Lowercase hex of `bytes`.
    package static func hex<Bytes: Sequence<UInt8>>(_ bytes: Bytes) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0xf)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// Walks `Elf64_Nhdr` records (namesz, descsz, type, name, desc; name and desc padded to `alignment`).
    static func buildID(inNotes notes: [UInt8], alignment: Int) -> String? {
        func padded(_ n: Int) -> Int { (n + alignment - 1) / alignment * alignment }
        var position = 0
        while position + 12 <= notes.count {
            let nameSize = Int(notes.loadLE(UInt32.self, at: position))
            let descSize = Int(notes.loadLE(UInt32.self, at: position + 4))
            let type = notes.loadLE(UInt32.self, at: position + 8)
            let nameStart = position + 12
            let descStart = nameStart + padded(nameSize)
            let next = descStart + padded(descSize)
            guard nameSize < notes.count, descSize < notes.count, descStart + descSize <= notes.count else {
                return nil
            }
            // NT_GNU_BUILD_ID with owner "GNU\0".
            if type == 3, nameSize == 4, notes[nameStart..<nameStart + 4].elementsEqual([0x47, 0x4e, 0x55, 0]),
                descSize > 0
            {
                return hex(notes[descStart..<descStart + descSize])
            }
            position = next
        }
        return nil
    }

    static func pread(_ fd: Int32, offset: UInt64, count: Int) -> [UInt8]? {
        guard count > 0, offset < UInt64(Int64.max) else { return nil }
        var buffer = [UInt8](repeating: 0, count: count)
        var filled = 0
        while filled < count {
            let n = buffer.withUnsafeMutableBytes {
                Glibc.pread(fd, $0.baseAddress! + filled, count - filled, off_t(offset) + off_t(filled))
            }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            filled += n
        }
        return Array(buffer[0..<filled])
    }
}

extension Array where Element == UInt8 {
    /// A little-endian integer at byte `offset` (the caller has checked the bounds).
    func loadLE<T: FixedWidthInteger>(_ type: T.Type, at offset: Int) -> T {
        var value: T = 0
        for i in 0..<MemoryLayout<T>.size where offset + i < count {
            value |= T(self[offset + i]) << (8 * i)
        }
        return value
    }
}
