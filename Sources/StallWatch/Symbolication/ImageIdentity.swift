// ImageIdentity: which file a process really maps as an image, and the key its symbols are cached under.
#if canImport(Glibc)
    import Glibc
#endif

/// The file behind one mapped image, checked against what the kernel says the process maps, and its cache key.
///
/// A path alone is no identity: a service can be redeployed while an old instance still runs, so the file now at
/// the path may not be the one the old instance maps. The file is opened at its path (through `/proc/<pid>/root`
/// for another process, so its mount namespace is honoured) and kept only when its inode is the one
/// `/proc/<pid>/maps` lists; otherwise the mapping itself is opened through `/proc/<pid>/map_files/` (root or
/// `CAP_SYS_ADMIN`). Where neither works, there is no identity and the image is symbolicated the old way, per
/// process. On overlay file systems the inode in the maps can be the lower layer's, which fails the check the
/// same way: correct, just not shared.
///
/// The key is the GNU build-id with the file's size (a stripped copy of the same build keeps the id but not the
/// symbols), or, for a file without a build-id, its device, inode, size and modification time.
final class ImageIdentity {
    let key: SymbolCache.Key
    let buildID: String?
    /// The image's path as the process maps it (what frames name).
    let path: String
    /// Open on the checked file until this identity is released.
    private let descriptor: Int32

    /// Opens and checks the file behind `image` in `processID`; nil for the vDSO and for files that cannot be
    /// opened or are not the mapped one.
    convenience init?(image: ImageMap.Image, processID: Int32) {
        guard image.path.hasPrefix("/") else { return nil }
        var info = stat()
        let own = processID == getpid()
        var fd = Self.open(own ? image.path : "/proc/\(processID)/root\(image.path)", inode: image.inode, &info)
        if fd < 0, !image.firstMapping.isEmpty {
            let range =
                String(image.firstMapping.lowerBound, radix: 16) + "-"
                + String(image.firstMapping.upperBound, radix: 16)
            fd = Self.open("/proc/\(processID)/map_files/\(range)", inode: image.inode, &info)
        }
        guard fd >= 0 else { return nil }
        self.init(descriptor: fd, path: image.path, info: info)
    }

    /// The file at `path` itself (a binary or debug file named by a report, not a process's image); nil when it
    /// is not a regular file that can be opened.
    convenience init?(file path: String) {
        var info = stat()
        let fd = Self.open(path, inode: 0, &info)
        guard fd >= 0 else { return nil }
        self.init(descriptor: fd, path: path, info: info)
    }

    /// Takes `fd`, open on the file `info` describes.
    private init(descriptor fd: Int32, path: String, info: stat) {
        descriptor = fd
        self.path = path
        buildID = BuildID.ofFile(descriptor: fd)
        let size = Int64(info.st_size)
        if let buildID {
            key = .buildID(buildID, size: size)
        } else {
            key = .file(
                device: UInt64(info.st_dev), inode: UInt64(info.st_ino), size: size,
                modifiedNanos: Int64(info.st_mtim.tv_sec) &* 1_000_000_000 &+ Int64(info.st_mtim.tv_nsec))
        }
    }

    deinit { close(descriptor) }

    /// A new descriptor for the checked file (close-on-exec), or -1; the caller owns it.
    func duplicateDescriptor() -> Int32 { fcntl(descriptor, F_DUPFD_CLOEXEC, 0) }

    /// `path` opened read-only when it is a regular file with the expected inode (any inode when 0), else -1.
    private static func open(_ path: String, inode: UInt64, _ info: inout stat) -> Int32 {
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return -1 }
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG, inode == 0 || UInt64(info.st_ino) == inode
        else {
            close(fd)
            return -1
        }
        return fd
    }
}
