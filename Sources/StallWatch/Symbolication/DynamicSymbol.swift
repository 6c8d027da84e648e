// DynamicSymbol: where an ELF file's exported symbol lies, in the file and in a process that mapped it.
#if canImport(Glibc)
    import Glibc
#endif

/// An exported symbol of a 64-bit little-endian ELF file, from its dynamic symbol table (`.dynsym` with the string
/// table it links to). Only the headers and those two tables are read.
package enum DynamicSymbol {
    /// The value (address relative to the file's first loaded segment, as linked) of the defined symbol `name`
    /// in the file at `path`, and that first segment's linked address; nil when either cannot be read.
    static func value(of name: String, inFile path: String) -> (value: UInt64, firstSegment: UInt64)? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        guard let header = BuildID.pread(fd, offset: 0, count: 64), header.count == 64,
            header[0..<4].elementsEqual([0x7f, 0x45, 0x4c, 0x46]), header[4] == 2, header[5] == 1
        else { return nil }
        // The first PT_LOAD segment's address, to which the mapping at file offset 0 corresponds.
        let programHeaders = header.loadLE(UInt64.self, at: 32)
        let programEntrySize = Int(header.loadLE(UInt16.self, at: 54))
        let programCount = Int(header.loadLE(UInt16.self, at: 56))
        guard programEntrySize >= 56, programCount > 0, programCount < 4096,
            let programs = BuildID.pread(fd, offset: programHeaders, count: programEntrySize * programCount),
            let firstLoad = (0..<programCount).first(where: {
                programs.loadLE(UInt32.self, at: $0 * programEntrySize) == 1
            })
        else { return nil }
        let firstSegment = programs.loadLE(UInt64.self, at: firstLoad * programEntrySize + 16)
        // Section headers: the dynamic symbol table (SHT_DYNSYM) and its string table (sh_link).
        let sections = header.loadLE(UInt64.self, at: 40)
        let sectionEntrySize = Int(header.loadLE(UInt16.self, at: 58))
        let sectionCount = Int(header.loadLE(UInt16.self, at: 60))
        guard sectionEntrySize >= 64, sectionCount > 0, sectionCount < 65_536,
            let table = BuildID.pread(fd, offset: sections, count: sectionEntrySize * sectionCount)
        else { return nil }
        func section(_ index: Int) -> (type: UInt32, offset: UInt64, size: UInt64, link: Int, entrySize: UInt64) {
            let base = index * sectionEntrySize
            return (
                table.loadLE(UInt32.self, at: base + 4), table.loadLE(UInt64.self, at: base + 24),
                table.loadLE(UInt64.self, at: base + 32), Int(table.loadLE(UInt32.self, at: base + 40)),
                table.loadLE(UInt64.self, at: base + 56)
            )
        }
        guard let dynsymIndex = (0..<sectionCount).first(where: { section($0).type == 11 /* SHT_DYNSYM */ }) else {
            return nil
        }
        let dynsym = section(dynsymIndex)
        guard dynsym.link < sectionCount, dynsym.entrySize == 24, dynsym.size <= 1 << 24 else { return nil }
        let strings = section(dynsym.link)
        guard strings.size <= 1 << 24, let symbols = BuildID.pread(fd, offset: dynsym.offset, count: Int(dynsym.size)),
            let names = BuildID.pread(fd, offset: strings.offset, count: Int(strings.size))
        else { return nil }
        let wanted = Array(name.utf8)
        for index in 0..<(symbols.count / 24) {
            let base = index * 24
            let nameOffset = Int(symbols.loadLE(UInt32.self, at: base))
            let sectionIndex = symbols.loadLE(UInt16.self, at: base + 6)
            guard sectionIndex != 0 /* SHN_UNDEF */, nameOffset + wanted.count < names.count,
                names[nameOffset..<nameOffset + wanted.count].elementsEqual(wanted),
                names[nameOffset + wanted.count] == 0
            else { continue }
            return (symbols.loadLE(UInt64.self, at: base + 8), firstSegment)
        }
        return nil
    }

    /// The address of the symbol `name` of the library whose file name is `library` in process `pid` (the
    /// library's mapping at file offset 0 is its first segment); nil when the process has not mapped it or the
    /// file cannot be read.
    static func address(of name: String, library: String, pid: Int32) -> UInt64? {
        guard let maps = ProcDirectory(processID: pid).maps(),
            let first = maps.first(where: { $0.offset == 0 && $0.path?.hasSuffix("/" + library) == true }),
            let path = first.path,
            // Read through the process's root, so a library of another mount namespace is still found.
            let found = value(of: name, inFile: "/proc/\(pid)/root" + path) ?? value(of: name, inFile: path)
        else { return nil }
        return first.start &+ found.value &- (found.firstSegment & ~0xfff)
    }
}
