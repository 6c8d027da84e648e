// TaskTableRegion: the memory the task table lives in, published as a file a sidecar reads, or private.
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The memory of one task table: a shared file (`<heartbeat directory>/stallwatch.<pid>.tasks`) when the heartbeat
/// is published, so that `stallwatch tasks` reads the table without ptrace, else anonymous memory.
///
/// The file is created as the heartbeat segment is: 0600, under an unpredictable temporary name with
/// `O_EXCL | O_NOFOLLOW`, sized and mapped, its header written, then renamed into place, so a reader never sees a
/// half-made header; it is removed by ``withdraw()`` and at normal process exit. It is sparse: pages are taken as
/// rows are used. The watchdog's thread writes it (no lock a worker or a loop could wait on: rows are bracketed by
/// a sequence word); readers copy rows and check their sequence.
package final class TaskTableRegion: @unchecked Sendable {  // The mapping is immutable; `withdrawn` is atomic.
    let base: UnsafeMutableRawPointer
    let size: Int
    /// The published file, nil for private memory.
    let path: String?
    private let withdrawn = Atomic<Bool>(false)

    /// File names are `stallwatch.<pid>.tasks`.
    static let fileSuffix = ".tasks"

    /// Where the process `pid` publishes its task table in `directory`.
    package static func path(directory: String, pid: Int32) -> String {
        directory + "/" + HeartbeatPublisher.fileNamePrefix + "\(pid)" + fileSuffix
    }

    /// Private memory for `size` bytes (zeroed, taken as touched).
    init(anonymousSize size: Int) throws(StallWatchError) {
        guard let raw = mmap(nil, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0),
            raw != MAP_FAILED
        else { throw Syscall.error("mmap", errno: errno) }
        base = raw
        self.size = size
        path = nil
    }

    /// A new file of `size` bytes in `directory`, mapped but not yet visible: call ``publish()`` once the
    /// header is written.
    init(directory: String, size: Int, pid: Int32) throws(StallWatchError) {
        let (raw, temporary) = try HeartbeatLeftovers.mapTemporary(in: directory, pid: pid, size: size)
        base = raw
        self.size = size
        pendingPath = temporary
        path = Self.path(directory: directory, pid: pid)
    }

    private var pendingPath: String?

    /// Makes the file visible under its name (replacing a stale one of an earlier process with this pid).
    func publish() throws(StallWatchError) {
        guard let path, let temporary = pendingPath else { return }
        pendingPath = nil
        guard rename(temporary, path) == 0 else {
            let err = errno
            unlink(temporary)
            throw Syscall.error("rename", errno: err, path: path)
        }
        Self.live.withLock { state in
            state.paths.insert(path)
            if !state.hooked {
                state.hooked = true
                atexit { TaskTableRegion.removeAllFiles() }
            }
        }
    }

    /// Removes the file (the mapping stays valid). Idempotent.
    func withdraw() {
        guard !withdrawn.exchange(true, ordering: .acquiringAndReleasing) else { return }
        if let temporary = pendingPath { unlink(temporary) }
        guard let path else { return }
        Self.live.withLock { _ = $0.paths.remove(path) }
        unlink(path)
    }

    deinit {
        withdraw()
        munmap(base, size)
    }

    private static let live = Mutex<(paths: Set<String>, hooked: Bool)>(([], false))

    private static func removeAllFiles() {
        let paths = live.withLock { state -> Set<String> in
            defer { state.paths.removeAll() }
            return state.paths
        }
        for path in paths { unlink(path) }
    }
}
