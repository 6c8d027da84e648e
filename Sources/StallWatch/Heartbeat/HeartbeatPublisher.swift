// HeartbeatPublisher: the shared-memory file through which a loop's published state reaches a sidecar.
import CStallWatchCore
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Publishes one loop's ``LoopState`` in a small shared-memory file (`<directory>/stallwatch.<pid>`), so that
/// `stallwatch watch` or `stallwatch daemon` can watch the loop from outside with the same detector.
///
/// The loop's words live *in* the mapped file: a transition costs exactly what it costs without the heartbeat
/// (atomic stores, no syscall). The file is created 0600 under an unpredictable temporary name with
/// `O_EXCL | O_NOFOLLOW` (so a name planted in a shared directory cannot block or redirect it), filled, then
/// renamed into place, so a reader never sees a half-written header; it is removed by
/// ``withdraw()``, by ``Watchdog/stop()`` and at normal process exit (`atexit`). A process killed by a signal
/// leaves the file behind; readers notice that its pid is gone (or reused) and skip it.
///
/// ```swift
/// let loop = try EventLoop()
/// let heartbeat = try HeartbeatPublisher.publish(loop: loop, configuration: configuration)
/// loop.run()
/// ```
public final class HeartbeatPublisher: @unchecked Sendable {  // The mapping is immutable; tid via atomics.
    /// The published file.
    package let path: String
    let segment: UnsafeMutablePointer<sw_heartbeat>
    let withdrawn = Atomic<Bool>(false)

    /// The default directory (``StallWatchConfiguration/defaultHeartbeatDirectory``).
    package static let defaultDirectory = StallWatchConfiguration.defaultHeartbeatDirectory
    /// File names are `stallwatch.<pid>` (first loop of a process) or `stallwatch.<pid>.<n>`.
    package static let fileNamePrefix = "stallwatch."

    /// A segment for a loop named `loopName`, published in `directory`; the loop moves its words into it
    /// (``LoopState``).
    init(directory: String, loopName: String, thresholdNanos: UInt64, hangThresholdNanos: UInt64)
        throws(StallWatchError)
    {
        let pid = getpid()
        let size = MemoryLayout<sw_heartbeat>.size
        let (raw, temporary) = try HeartbeatLeftovers.mapTemporary(in: directory, pid: pid, size: size)
        segment = raw.bindMemory(to: sw_heartbeat.self, capacity: 1)
        var header = sw_heartbeat()
        header.magic = SW_HEARTBEAT_MAGIC
        header.version = SW_HEARTBEAT_VERSION
        header.size = UInt32(size)
        header.pid = pid
        header.threshold_ns = thresholdNanos
        header.hang_threshold_ns = hangThresholdNanos
        header.start_time_ticks = Self.startTimeTicks(pid: pid) ?? 0
        // Printable text only, cut at a character boundary: readers show it to people.
        var nameBytes = 0
        withUnsafeMutableBytes(of: &header.loop_name) { buffer in
            for character in PrintableText.filtered(loopName) {
                let utf8 = Array(String(character).utf8)
                guard nameBytes + utf8.count < buffer.count else { break }
                for byte in utf8 {
                    buffer[nameBytes] = byte
                    nameBytes += 1
                }
            }
        }
        segment.initialize(to: header)
        // The name is `stallwatch.<pid>` for the first loop; a name someone else holds (a file another user
        // planted in a sticky directory cannot be replaced) moves on to the next index.
        var placed: String?
        var failure: (call: String, errno: Int32, path: String)?
        for _ in 0..<16 {
            let index = Self.registry.withLock { state -> Int in
                state.next += 1
                return state.next
            }
            let candidate = directory + "/" + Self.fileNamePrefix + (index == 1 ? "\(pid)" : "\(pid).\(index)")
            if rename(temporary, candidate) == 0 {
                placed = candidate
                break
            }
            failure = ("rename", errno, candidate)
            guard [EPERM, EACCES, EISDIR, ENOTEMPTY, EEXIST].contains(errno) else { break }
        }
        guard let placed else {
            munmap(raw, size)
            unlink(temporary)
            let failure = failure ?? ("rename", EEXIST, directory)
            throw Syscall.error(failure.call, errno: failure.errno, path: failure.path)
        }
        path = placed
        Self.registry.withLock { _ = $0.live.insert(placed) }
        Self.installExitHook()
    }

    deinit {
        withdraw()
        munmap(segment, MemoryLayout<sw_heartbeat>.size)
    }

    /// Removes the file (the mapping stays valid for the loop). Idempotent; safe from any thread.
    public func withdraw() {
        guard !withdrawn.exchange(true, ordering: .acquiringAndReleasing) else { return }
        Self.registry.withLock { _ = $0.live.remove(path) }
        unlink(path)
        unlink(Self.snapshotAnswerPath(forSegment: path))
    }

    var statePointer: UnsafeMutablePointer<sw_loop_state> {
        UnsafeMutableRawPointer(segment).advanced(by: MemoryLayout<sw_heartbeat>.offset(of: \.state)!)
            .assumingMemoryBound(to: sw_loop_state.self)
    }

    func publishThreadID(_ tid: Int32) { sw_heartbeat_set_tid(segment, tid) }

    // MARK: Process-wide

    private static let registry = Mutex<(next: Int, live: Set<String>, hooked: Bool)>((0, [], false))

    private static func installExitHook() {
        let install = registry.withLock { state -> Bool in
            defer { state.hooked = true }
            return !state.hooked
        }
        if install { atexit { HeartbeatPublisher.removeAllFiles() } }
    }

    /// At exit: unlink every segment still published (the mappings go with the process).
    static func removeAllFiles() {
        let paths = registry.withLock { state -> Set<String> in
            defer { state.live.removeAll() }
            return state.live
        }
        for path in paths {
            unlink(path)
            unlink(snapshotAnswerPath(forSegment: path))
        }
    }

    /// Field 22 of `/proc/<pid>/stat` (start time in clock ticks after boot), which tells a reused pid apart.
    package static func startTimeTicks(pid: Int32) -> UInt64? {
        ProcDirectory(processID: pid).stat()?.startTimeTicks
    }
}
