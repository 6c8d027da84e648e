// ReportDirectory: the checks and raw directory operations shared by ReportWriter and ReportStore.
#if canImport(Glibc)
    import Glibc
#endif

/// Opening, checking and listing a report directory, with errors that name the path.
enum ReportDirectory {
    /// Opens `path` as a directory and returns its descriptor.
    ///
    /// With `forWriting`, a missing directory (and missing parents) is created with mode 0700, and the directory
    /// must not be a symlink and must belong to this user or root: someone else's directory in a shared place
    /// like `/var/tmp` could be a trap set before we first ran. Readers may follow symlinks.
    static func open(_ path: String, forWriting: Bool) throws(StallWatchError) -> Int32 {
        if forWriting {
            var info = stat()
            if lstat(path, &info) != 0 {
                guard errno == ENOENT else { throw failure("lstat", errno: errno, path: path) }
                try makeDirectories(path)
            } else if info.st_mode & S_IFMT == S_IFLNK {
                throw StallWatchError(
                    .report, "refusing to write reports into \(path): it is a symbolic link", context: ["path": path])
            } else if info.st_mode & S_IFMT != S_IFDIR {
                throw StallWatchError(
                    .report, "cannot write reports into \(path): not a directory", context: ["path": path])
            }
        }
        let flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC | (forWriting ? O_NOFOLLOW : 0)
        let fd = Glibc.open(path, flags)
        guard fd >= 0 else {
            let error = errno
            if error == ELOOP {
                throw StallWatchError(
                    .report, "refusing to write reports into \(path): it is a symbolic link", context: ["path": path])
            }
            if error == ENOTDIR {
                throw StallWatchError(.report, "\(path) is not a directory", context: ["path": path], errno: error)
            }
            throw failure("open", errno: error, path: path)
        }
        if forWriting {
            var info = stat()
            // Checked on the descriptor, after opening, so that a swap between the checks cannot slip through.
            if fstat(fd, &info) == 0, info.st_uid != geteuid(), info.st_uid != 0 {
                close(fd)
                throw StallWatchError(
                    .report,
                    "refusing to write reports into \(path): owned by uid \(info.st_uid), not by uid \(geteuid()) or root",
                    context: ["path": path])
            }
            // Reports carry stacks and request data: a directory of ours that others may read is tightened (not
            // a sticky shared one such as /tmp, which is nobody's report directory alone).
            if info.st_uid == geteuid(), info.st_mode & 0o077 != 0, info.st_mode & S_ISVTX == 0,
                fchmod(fd, 0o700) != 0
            {
                let error = errno
                close(fd)
                throw failure("fchmod 0700", errno: error, path: path)
            }
        }
        return fd
    }

    /// `mkdir -p` with mode 0700 for every directory created.
    private static func makeDirectories(_ path: String) throws(StallWatchError) {
        var prefix = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/") {
            prefix += "/" + component
            if mkdir(prefix, 0o700) != 0, errno != EEXIST { throw failure("mkdir", errno: errno, path: prefix) }
        }
    }

    /// Calls `body` with each entry name except `.` and `..`, streaming (one `readdir` at a time).
    /// The descriptor stays open and owned by the caller.
    static func forEachEntry(_ directoryFD: Int32, _ body: (String) -> Void) {
        let copy = dup(directoryFD)
        guard copy >= 0, let stream = fdopendir(copy) else {
            if copy >= 0 { close(copy) }
            return
        }
        defer { closedir(stream) }
        // The copy shares its offset with the caller's descriptor: start from the beginning.
        rewinddir(stream)
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { bytes in
                String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name == "." || name == ".." { continue }
            body(name)
        }
    }

    /// A `.report` error for a failed system call on `path`.
    static func failure(_ call: String, errno error: Int32, path: String) -> StallWatchError {
        StallWatchError(
            .report, "\(call) \(path): \(String(cString: strerror(error)))", context: ["path": path, "call": call],
            errno: error)
    }
}
