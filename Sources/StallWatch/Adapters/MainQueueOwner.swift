// Which thread drains the Dispatch main queue right now: after dispatchMain() it is a pool thread, not main.
import CStallWatchCore
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Finds the thread draining the Dispatch main queue, for sampling the right thread during a main-queue stall.
///
/// `dispatchMain()` makes the main thread exit; libdispatch then drains the main queue on pool threads, and
/// a block can run on a different thread from the last one. The thread draining a queue holds the queue's
/// drain lock, whose owner thread id sits in the low half of `dq_state` in `_dispatch_main_q` (56 bytes in on
/// 64-bit Linux builds of swift-corelibs-libdispatch). That layout is private, so it is trusted only once a
/// block running on the main queue has read its own thread id there; every mismatch seen before that
/// confirmation counts against it, and after a few the reader gives up (callers fall back to the thread that
/// last ran a ping).
final class MainQueueOwner: @unchecked Sendable {  // `confirmed`/`mismatches`: main-queue blocks only (serial).
    static let stateOffset: UInt = 56
    private let queue: UnsafeRawPointer?
    private var confirmed = false
    private var mismatches = 0
    /// Published once confirmed; read from any thread.
    private let usable = Atomic<Bool>(false)

    init() {
        // The handle of the main program searches it and its dependencies (libdispatch); not closed: it
        // refers to the process image itself.
        let handle = dlopen(nil, RTLD_NOW)
        queue = dlsym(handle, "_dispatch_main_q").map { UnsafeRawPointer($0) }
    }

    /// Called from a block running on the main queue: checks the layout against the calling thread.
    func confirm(drainingThread tid: Int32) {
        guard let queue, !confirmed, mismatches < 3 else { return }
        if sw_dispatch_queue_owner(queue, Self.stateOffset) == tid {
            confirmed = true
            usable.store(true, ordering: .releasing)
        } else {
            mismatches += 1
        }
    }

    /// The thread draining the main queue now, or nil when unknown (layout not confirmed, or nobody drains).
    var currentOwner: Int32? {
        guard let queue, usable.load(ordering: .acquiring) else { return nil }
        let tid = sw_dispatch_queue_owner(queue, Self.stateOffset)
        return tid == 0 ? nil : tid
    }
}
