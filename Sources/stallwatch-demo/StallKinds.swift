// The classic ways a loop stalls, each in a non-inlined function named after it so reports can name it.
import CStallWatchCore
import Foundation
import StallWatch
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The stall kinds `stallwatch-demo stall --kind` can inject.
enum StallKind: String, CaseIterable {
    case cpu, sleep, lock, io, deadlock, contention, reentrant, wait
    /// The loop waits for a Swift `Synchronization.Mutex` a background thread holds.
    case swiftMutex = "swift-mutex"
    /// Every Concurrency pool worker at once (`--loop concurrency`); on a single loop the same as `sleep`.
    case saturate
    /// Tasks that wait forever with every thread idle (`--loop concurrency` only): see ``HungAwaits``.
    case hungAwait = "hung-await"
    /// `warmCaches` for 400 ms, under the threshold (500 ms unless set), then the stall, `stallOnCPU`, in the loop's
    /// next turn: the report's lead-up shows the long item just before the stuck one (``LeadUpStall``).
    case leadUp = "lead-up"
}

/// Functions that stall the calling thread (the loop) for about `durationMs`.
enum Stalls {
    /// Runs the stall, then says on standard error how long it ran by the program's own clock, to set beside the
    /// report (disk I/O can overrun the asked-for time), and when, in seconds since 1970 as reports date stalls:
    /// `stallwatch-demo: the io stall ran 771.3 ms (from 1796601234.123456 to 1796601234.894756)`.
    static func run(_ kind: StallKind, durationMs: Int) {
        let tid = sw_gettid()
        let waitAtStart = runQueueWaitNanos(thread: tid)
        lastStall.withLock { $0 = waitAtStart.map { (tid, $0) } }
        let injected = InjectedStalls.shared.begin()
        let startedAt = Date()
        let start = DispatchTime.now().uptimeNanoseconds
        defer {
            let ran = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6
            let endedAt = Date()
            InjectedStalls.shared.end(injected)
            let line = String(
                format: "stallwatch-demo: the %@ stall ran %.1f ms (from %.6f to %.6f)\n", kind.rawValue, ran,
                startedAt.timeIntervalSince1970, endedAt.timeIntervalSince1970)
            FileHandle.standardError.write(Data(line.utf8))
        }
        switch kind {
        case .cpu, .leadUp: stallOnCPU(durationMs: durationMs)
        case .sleep: stallInSleep(durationMs: durationMs)
        case .lock: stallOnLock(durationMs: durationMs)
        case .io: stallOnDiskIO(durationMs: durationMs)
        case .deadlock: stallInDeadlock(durationMs: durationMs)
        case .contention: stallOnContendedLock(durationMs: durationMs)
        case .reentrant: stallOnReentrantLock(durationMs: durationMs)
        case .wait: stallInWait(durationMs: durationMs)
        case .swiftMutex: stallOnSwiftMutex(durationMs: durationMs)
        case .saturate: stallInSleep(durationMs: durationMs)
        case .hungAwait: break  // no thread stalls; main.swift runs it on the pool only
        }
    }

    /// The thread of the last stall run and its run-queue wait as the stall began.
    static let lastStall = Mutex<(threadID: Int32, runQueueWaitNanos: UInt64)?>(nil)

    /// Says on standard error how long the last stall's thread has waited for a CPU since the stall began
    /// (`stallwatch-demo: the stall's thread waited 12.3 ms for a CPU`): what a loaded machine added to the
    /// work around the stall — a pool job's before and after it — which the stall's own timing leaves out.
    static func printRunQueueWaitSinceLastStall() {
        guard let (tid, before) = lastStall.withLock({ $0 }), let now = runQueueWaitNanos(thread: tid), now >= before
        else { return }
        let line = String(
            format: "stallwatch-demo: the stall's thread waited %.1f ms for a CPU\n", Double(now - before) / 1e6)
        FileHandle.standardError.write(Data(line.utf8))
    }

    /// A thread's run-queue wait so far (the second field of its `schedstat`), in nanoseconds.
    static func runQueueWaitNanos(thread: Int32) -> UInt64? {
        let path = "/proc/\(getpid())/task/\(thread)/schedstat"
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return nil }
        let fields = text.split(separator: " ")
        return fields.count >= 2 ? UInt64(fields[1]) : nil
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

    /// How long `--kind lead-up` warms caches before its stall, and its default threshold (above that).
    static let warmCachesMs = 400
    static let leadUpThresholdMs = 500

    /// `--kind lead-up`: `warmCaches` as one item of the loop, then `stallOnCPU` as the next, queued by it (so it
    /// runs in the loop's next turn: the stall is stallOnCPU alone).
    static func runAfterWarmingCaches(on loop: EventLoop, durationMs: Int) {
        loop.perform(label: "warmCaches") {
            warmCaches(durationMs: warmCachesMs)
            loop.perform(label: "stallOnCPU") { run(.leadUp, durationMs: durationMs) }
        }
    }

    /// Warming a cache on the loop: CPU work shorter than the threshold, so no stall of its own.
    @inline(never)
    static func warmCaches(durationMs: Int) {
        let end = DispatchTime.now().uptimeNanoseconds + UInt64(durationMs) * 1_000_000
        var hash: UInt64 = 0x8422_2325_cbf2_9ce4
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
        let mutex = TimedMutex()
        let held = DispatchSemaphore(value: 0)
        let holder = Thread {
            setCurrentThreadName("demo-lock-holder")
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

    /// The loop needs a Swift `Mutex` (from Synchronization) that a background thread holds for the duration.
    @inline(never)
    static func stallOnSwiftMutex(durationMs: Int) {
        final class Sessions: Sendable { let table = Mutex<[String: Int]>([:]) }
        let sessions = Sessions()
        let held = DispatchSemaphore(value: 0)
        let holder = Thread {
            setCurrentThreadName("demo-mutex-holder")
            sessions.table.withLock { table in
                held.signal()
                sleepFor(milliseconds: durationMs)  // a slow rebuild under the lock
                table["rebuilt"] = 1
            }
        }
        holder.name = "demo-mutex-holder"
        holder.start()
        held.wait()
        let count = sessions.table.withLock { $0.count }  // the loop blocks here, in the Mutex's futex wait
        blackHole(UInt64(count))
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
        writeAndSync(fd: fd, block: block, until: end, cap: 64 << 20)
    }

    /// Two locks taken in opposite order by the loop and a worker. The loop gives up after `durationMs` (a timed
    /// lock), so the demo survives; until then both threads wait for each other.
    @inline(never)
    static func stallInDeadlock(durationMs: Int) {
        let accounts = TimedMutex()
        let ledger = TimedMutex()
        let workerHasLedger = DispatchSemaphore(value: 0)
        let done = DispatchSemaphore(value: 0)
        accounts.lock()
        let worker = Thread {
            setCurrentThreadName("demo-ledger-worker")
            ledger.lock()
            workerHasLedger.signal()
            accounts.lock()  // waits for the loop
            accounts.unlock()
            ledger.unlock()
            done.signal()
        }
        worker.name = "demo-ledger-worker"
        worker.start()
        workerHasLedger.wait()
        let gotLedger = ledger.lock(timeoutMs: durationMs)  // waits for the worker: deadlock until the timeout
        if gotLedger { ledger.unlock() }
        accounts.unlock()
        done.wait()
    }

    /// A background "DB writer" holds the lock for long writes, again and again, while the loop keeps needing it
    /// for short updates.
    @inline(never)
    static func stallOnContendedLock(durationMs: Int) {
        let database = TimedMutex()
        let stop = DemoFlag()
        let writing = DispatchSemaphore(value: 0)
        let writer = Thread {
            setCurrentThreadName("demo-db-writer")
            var first = true
            while !stop.isSet {
                database.lock()
                if first {
                    writing.signal()
                    first = false
                }
                sleepFor(milliseconds: 100)  // a long write under the lock
                database.unlock()
                sched_yield()
            }
        }
        writer.name = "demo-db-writer"
        writer.start()
        writing.wait()
        let end = DispatchTime.now().uptimeNanoseconds + UInt64(durationMs) * 1_000_000
        var updates = 0
        while DispatchTime.now().uptimeNanoseconds < end {
            database.lock()  // the loop waits here most of the time
            updates += 1
            database.unlock()
        }
        stop.set()
        blackHole(UInt64(updates))
    }

    /// A non-reentrant lock re-entered from an enumeration callback: the loop waits for itself. The inner
    /// acquisition gives up after `durationMs`.
    @inline(never)
    static func stallOnReentrantLock(durationMs: Int) {
        let sessions = TimedMutex()
        let names = ["alpha", "beta", "gamma"]
        sessions.lock()
        for name in names {
            // The callback wants the same lock to read a session's details.
            if name == "beta", sessions.lock(timeoutMs: durationMs) { sessions.unlock() }
        }
        sessions.unlock()
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

/// A flag set once by one thread and read by another.
final class DemoFlag: Sendable {
    private let value = Atomic<Bool>(false)
    func set() { value.store(true, ordering: .releasing) }
    var isSet: Bool { value.load(ordering: .acquiring) }
}
