// Whole reads of small /proc and /sys files.

#if canImport(Glibc)
    import Glibc
#endif

/// Whole-file reads for /proc files, whose stat size is 0, and small ELF reads.
///
/// `package`: the sidecar reads another process's /proc files with the same code.
enum ProcFile {
    /// Reads `path` to the end.
    static func read(_ path: String) throws(StallWatchError) -> String {
        let bytes = try readBytes(path)
        return String(decoding: bytes, as: UTF8.self)
    }

    static func readBytes(_ path: String) throws(StallWatchError) -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw Syscall.error("open", errno: errno, path: path) }
        defer { close(fd) }
        var result: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw Syscall.error("read", errno: errno, path: path)
            }
            if count == 0 { return result }
            result.append(contentsOf: chunk[0..<count])
        }
    }
}

extension ProcFile {
    /// The file's text without trailing newlines; nil if it cannot be read (the thread or process is gone, or
    /// access is refused), with `errno` saying why.
    package static func text(_ path: String) -> String? {
        var text: String
        do {
            text = try read(path)
        } catch {
            errno = error.errno ?? EIO
            return nil
        }
        while text.hasSuffix("\n") { text.removeLast() }
        return text
    }
}
