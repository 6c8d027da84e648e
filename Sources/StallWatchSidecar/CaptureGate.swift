// CaptureGate: a process must not be stopped by job control while it holds another process in a ptrace stop.
#if canImport(Glibc)
    import Glibc
#endif

/// Captures that stop another process's thread (``PtraceSampler``) run inside ``capturing(_:)``; a sidecar
/// that must stop itself (^Z, SIGTSTP) does it inside ``excludingCaptures(_:)``, which waits for the capture
/// under way to detach and holds new ones off until the process runs again. Stopped mid-capture, the sidecar
/// would leave its target in tracing stop for as long as it stays suspended.
///
/// A process-wide reader/writer lock that prefers the writer, so back-to-back captures cannot starve a stop.
enum CaptureGate {
    nonisolated(unsafe) private static let lock: UnsafeMutablePointer<pthread_rwlock_t> = {
        let lock = UnsafeMutablePointer<pthread_rwlock_t>.allocate(capacity: 1)
        var attributes = pthread_rwlockattr_t()
        pthread_rwlockattr_init(&attributes)
        pthread_rwlockattr_setkind_np(&attributes, Int32(PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP))
        pthread_rwlock_init(lock, &attributes)
        pthread_rwlockattr_destroy(&attributes)
        return lock
    }()

    /// Runs one capture; captures of several targets may run at once.
    static func capturing<Result>(_ body: () throws -> Result) rethrows -> Result {
        pthread_rwlock_rdlock(lock)
        defer { pthread_rwlock_unlock(lock) }
        return try body()
    }

    /// Runs `body` once no capture is under way, with new captures held off until it returns.
    static func excludingCaptures<Result>(_ body: () throws -> Result) rethrows -> Result {
        pthread_rwlock_wrlock(lock)
        defer { pthread_rwlock_unlock(lock) }
        return try body()
    }
}
