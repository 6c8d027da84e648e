// TimedMutex: the demo's plain pthread mutex, so stacks show the libc lock calls.
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A plain pthread mutex (normal type: not reentrant, no error checking) with a timed lock.
final class TimedMutex: @unchecked Sendable {
    // @unchecked Sendable: the pointer never changes and a pthread mutex is made to be shared.
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    init() { pthread_mutex_init(mutex, nil) }
    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }
    func lock() { pthread_mutex_lock(mutex) }
    func unlock() { pthread_mutex_unlock(mutex) }

    /// Waits at most `timeoutMs` for the mutex; returns true if it is now held.
    func lock(timeoutMs: Int) -> Bool {
        var deadline = timespec()
        clock_gettime(CLOCK_REALTIME, &deadline)
        let nanos = Int(deadline.tv_nsec) + (timeoutMs % 1000) * 1_000_000
        deadline.tv_sec += timeoutMs / 1000 + nanos / 1_000_000_000
        deadline.tv_nsec = nanos % 1_000_000_000
        while true {
            let result = pthread_mutex_timedlock(mutex, &deadline)
            if result != EINTR { return result == 0 }
        }
    }
}
