// The classic ways a loop stalls, each in a non-inlined function named after it so reports can name it.
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The stall kinds `stallwatch-demo stall --kind` can inject.
enum StallKind: String, CaseIterable {
    case cpu, sleep, lock, io
}

/// Functions that stall the calling thread (the loop) for about `durationMs`.
enum Stalls {
    static func run(_ kind: StallKind, durationMs: Int) {
        switch kind {
        case .cpu: stallOnCPU(durationMs: durationMs)
        case .sleep: stallInSleep(durationMs: durationMs)
        case .lock: stallOnLock(durationMs: durationMs)
        case .io: stallOnDiskIO(durationMs: durationMs)
        }
    }

    /// Heavy computation on the loop: hashes until the time is up.
    @inline(never)
    static func stallOnCPU(durationMs: Int) {
        let end = DispatchTime.now().uptimeNanoseconds + UInt64(durationMs) * 1_000_000
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        while DispatchTime.now().uptimeNanoseconds < end {
            for i in 0..<20_000 { hash = (hash ^ UInt64(i)) &* 0x100_0000_01b3 }
        }
        blackHole(hash)
    }

    /// A synchronous sleep on the loop (a retry back-off, a "small" delay).
    @inline(never)
    static func stallInSleep(durationMs: Int) {
        sleepFor(milliseconds: durationMs)
    }

    /// The loop needs a lock that a background thread holds for the whole duration.
    @inline(never)
    static func stallOnLock(durationMs: Int) {
        let mutex = DemoMutex()
        let held = DispatchSemaphore(value: 0)
        let holder = Thread {
            mutex.lock()
            held.signal()
            sleepFor(milliseconds: durationMs)
            mutex.unlock()
        }
        holder.name = "demo-lock-holder"
        holder.start()
        held.wait()
        mutex.lock()  // the loop blocks here, in pthread_mutex_lock
        mutex.unlock()
    }

    /// Synchronous disk writes with fsync on the loop until the time is up.
    @inline(never)
    static func stallOnDiskIO(durationMs: Int) {
        let path = NSTemporaryDirectory() + "stallwatch-demo-io-\(getpid()).dat"
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        guard fd >= 0 else { return }
        defer {
            close(fd)
            unlink(path)
        }
        let block = [UInt8](repeating: 0x5a, count: 1 << 20)
        let end = DispatchTime.now().uptimeNanoseconds + UInt64(durationMs) * 1_000_000
        var written = 0
        while DispatchTime.now().uptimeNanoseconds < end {
            written += block.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            fsync(fd)
            if written > 64 << 20 {
                ftruncate(fd, 0)
                lseek(fd, 0, SEEK_SET)
                written = 0
            }
        }
    }

    /// nanosleep(2), resumed after signals (the sampler's signal interrupts it).
    static func sleepFor(milliseconds: Int) {
        var request = timespec(tv_sec: milliseconds / 1000, tv_nsec: (milliseconds % 1000) * 1_000_000)
        var remaining = timespec()
        while nanosleep(&request, &remaining) == -1 && errno == EINTR { request = remaining }
    }

    @inline(never)
    static func blackHole(_ value: UInt64) {
        if value == 42 { print("") }
    }
}

/// A plain pthread mutex (not NSLock), so stacks show the libc lock call.
final class DemoMutex: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    init() { pthread_mutex_init(mutex, nil) }
    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }
    func lock() { pthread_mutex_lock(mutex) }
    func unlock() { pthread_mutex_unlock(mutex) }
}
