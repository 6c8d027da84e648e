// ProcDescriptors: a process's open descriptors as /proc shows them — fd links, fdinfo, epoll sets, namespaces.
#if canImport(Glibc)
    import Glibc
#endif

extension ProcDirectory {
    /// What descriptor `fd` refers to (`/proc/<pid>/fd/<fd>`'s link): a path, `pipe:[inode]`, `socket:[inode]`,
    /// `anon_inode:[eventfd]` …; nil (with `errno`) when it cannot be read.
    package func descriptorTarget(_ fd: Int32) -> String? { link("fd/\(fd)") }

    /// Every open descriptor with what it refers to; nil (with `errno`: EACCES, EPERM for another user's process)
    /// when the list cannot be read. A descriptor closed while listing is left out.
    package func descriptors() -> [(fd: Int32, target: String)]? {
        guard let directory = opendir(path + "/fd") else { return nil }
        defer { closedir(directory) }
        var result: [(fd: Int32, target: String)] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) {
                String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
            }
            guard let fd = Int32(name), let target = descriptorTarget(fd) else { continue }
            result.append((fd, target))
        }
        return result
    }

    /// The open-file flags of descriptor `fd` (`fdinfo`'s `flags:`, octal: `O_WRONLY`, `O_NONBLOCK` …); nil when
    /// unreadable.
    package func descriptorFlags(_ fd: Int32) -> Int? {
        guard let text = text("fdinfo/\(fd)") else { return nil }
        return ProcDescriptorInfo.flags(in: text)
    }

    /// The descriptors epoll descriptor `fd` watches (`fdinfo`'s `tfd:` lines); nil when unreadable.
    package func epollTargets(_ fd: Int32) -> [Int32]? {
        text("fdinfo/\(fd)").map(ProcDescriptorInfo.epollTargets(in:))
    }

    /// The namespace link `ns/<kind>` (`net:[4026531840]`): two processes with the same link share it.
    package func namespace(_ kind: String) -> String? { link("ns/\(kind)") }

    private func link(_ name: String) -> String? {
        var buffer = [CChar](repeating: 0, count: 4096)
        let n = readlink(path + "/" + name, &buffer, buffer.count - 1)
        guard n > 0 else { return nil }
        return String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

extension ProcSystem {
    /// Every process's id (the numeric entries of `/proc`).
    package static func processIDs() -> [Int32] {
        guard let directory = opendir("/proc") else { return [] }
        defer { closedir(directory) }
        var result: [Int32] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) {
                String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
            }
            if let pid = Int32(name), pid > 0 { result.append(pid) }
        }
        return result
    }
}

/// Parsers for `/proc/<pid>/fdinfo/<fd>` text; hostile or truncated text yields nil or nothing, never a crash.
package enum ProcDescriptorInfo {
    /// `flags:\t0100002` (octal).
    package static func flags(in text: String) -> Int? {
        for line in text.split(separator: "\n") where line.hasPrefix("flags:") {
            return Int(line.dropFirst(6).trimmingCharacters(), radix: 8)
        }
        return nil
    }

    /// The `tfd:` of each `tfd:        5 events:       19 data: …` line of an epoll descriptor's fdinfo.
    package static func epollTargets(in text: String) -> [Int32] {
        text.split(separator: "\n").compactMap { line in
            guard line.hasPrefix("tfd:") else { return nil }
            return line.dropFirst(4).split(separator: " ", omittingEmptySubsequences: true).first.flatMap { Int32($0) }
        }
    }

    /// The inode of a `pipe:[123]` or `socket:[123]` link (`kind` is `pipe` or `socket`); nil for anything else.
    package static func inode(_ target: String, kind: String) -> UInt64? {
        guard target.hasPrefix(kind + ":["), target.hasSuffix("]") else { return nil }
        return UInt64(target.dropFirst(kind.count + 2).dropLast())
    }
}

extension Substring {
    fileprivate func trimmingCharacters() -> Substring {
        var s = self
        while let c = s.first, c == " " || c == "\t" { s = s.dropFirst() }
        while let c = s.last, c == " " || c == "\t" { s = s.dropLast() }
        return s
    }
}
