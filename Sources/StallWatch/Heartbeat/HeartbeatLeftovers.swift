// HeartbeatLeftovers: the heartbeat's temporary files, created under names nobody can guess, cleaned when stale.
#if canImport(Glibc)
    import Glibc
#endif

/// Temporary files of heartbeat publishing: `.stallwatch.<pid>.<random>.tmp` in the heartbeat directory.
///
/// The name carries 64 random bits, so another local user cannot plant it in a sticky directory such as
/// `/dev/shm` to make publishing fail, and `O_EXCL | O_NOFOLLOW` refuses anything already there. A writer killed
/// between create and rename leaves its temporary behind; the next publisher removes those older than a minute
/// (a live one exists for microseconds) that it may remove.
enum HeartbeatLeftovers {
    static let temporaryPrefix = "." + HeartbeatPublisher.fileNamePrefix
    static let temporarySuffix = ".tmp"
    /// Temporaries older than this are leftovers of a killed writer.
    static let staleSeconds = 60

    /// Creates a fresh temporary file; returns its descriptor and path.
    /// - Throws: `.systemCall` naming `open` and the full path when no name could be created.
    static func createTemporary(in directory: String, pid: Int32) throws(StallWatchError) -> (Int32, String) {
        var attempt = 0
        while true {
            let random = String(UInt64.random(in: 0...UInt64.max), radix: 16)
            let path = directory + "/" + temporaryPrefix + "\(pid).\(random)" + temporarySuffix
            let fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
            if fd >= 0 { return (fd, path) }
            let error = errno
            if (error == EEXIST || error == EINTR) && attempt < 8 {
                attempt += 1
                continue
            }
            throw Syscall.error("open", errno: error, path: path)
        }
    }

    /// Creates a fresh temporary file of `size` bytes, readable and writable by its owner alone, mapped shared;
    /// returns the mapping and the file's path (stale temporaries in `directory` are removed first). On failure the
    /// temporary is gone.
    /// - Throws: `.systemCall` naming the call (`open`, `fchmod`, `ftruncate`, `mmap`) and the path.
    static func mapTemporary(
        in directory: String, pid: Int32, size: Int
    ) throws(StallWatchError) -> (raw: UnsafeMutableRawPointer, path: String) {
        remove(in: directory)
        let (fd, temporary) = try createTemporary(in: directory, pid: pid)
        defer { close(fd) }
        do throws(StallWatchError) {
            try Syscall.retrying("fchmod") { fchmod(fd, 0o600) }
            try Syscall.retrying("ftruncate") { ftruncate(fd, off_t(size)) }
        } catch {
            unlink(temporary)
            throw error
        }
        guard let raw = mmap(nil, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0), raw != MAP_FAILED else {
            let err = errno
            unlink(temporary)
            throw Syscall.error("mmap", errno: err, path: temporary)
        }
        return (raw, temporary)
    }

    /// Removes stale temporaries (see ``staleSeconds``) in `directory`; best effort, never fails.
    static func remove(in directory: String) {
        guard let stream = opendir(directory) else { return }
        defer { closedir(stream) }
        let descriptor = dirfd(stream)
        let now = time(nil)
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { bytes in
                String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
            }
            guard name.hasPrefix(temporaryPrefix), name.hasSuffix(temporarySuffix) else { continue }
            var info = stat()
            guard fstatat(descriptor, name, &info, AT_SYMLINK_NOFOLLOW) == 0, info.st_mode & S_IFMT == S_IFREG,
                info.st_uid == geteuid(), now - info.st_mtim.tv_sec > staleSeconds
            else { continue }
            unlinkat(descriptor, name, 0)
        }
    }
}
