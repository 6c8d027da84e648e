// Which thread drains a Dispatch queue right now: after dispatchMain() the main queue runs on pool threads.
import CStallWatchCore
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Finds the thread draining a Dispatch queue, for sampling the right thread during a stall of that queue.
///
/// `dispatchMain()` makes the main thread exit; libdispatch then drains the main queue on pool threads, and
/// a block can run on a different thread from the last one — as any serial queue's blocks do. The thread
/// draining a queue holds the queue's drain lock, whose owner thread id sits in the low half of `dq_state`
/// (56 bytes into the queue object on 64-bit Linux builds of swift-corelibs-libdispatch). The main queue's
/// object is `_dispatch_main_q`; any other queue's is learned from a block running on it
/// (`dispatch_get_current_queue()`). The layout is private, so it is trusted only once a block running on the
/// queue has read its own thread id there; every mismatch seen before that confirmation counts against it, and
/// after a few the reader gives up (callers then know no thread).
final class QueueDrainOwner: @unchecked Sendable {  // `confirmed`/`mismatches`: blocks of the queue only (serial).
    static let stateOffset: UInt = 56
    /// The queue object's address (0 until known); read from any thread.
    private let queue = Atomic<UInt>(0)
    private var confirmed = false
    private var mismatches = 0
    /// Published once confirmed; read from any thread.
    private let usable = Atomic<Bool>(false)

    private typealias CurrentQueue = @convention(c) () -> UnsafeRawPointer?
    /// libdispatch's `dispatch_get_current_queue` (exported, but deprecated and not in Swift's overlay).
    private static let currentQueue: CurrentQueue? = {
        // The handle of the main program searches it and its dependencies (libdispatch); not closed: it
        // refers to the process image itself.
        guard let symbol = dlsym(dlopen(nil, RTLD_NOW), "dispatch_get_current_queue") else { return nil }
        return unsafeBitCast(symbol, to: CurrentQueue.self)
    }()

    /// - Parameter mainQueue: True for the main queue (known at once); false for a queue learned from the first
    ///   ``confirm(drainingThread:)``.
    init(mainQueue: Bool) {
        guard mainQueue else { return }
        if let main = dlsym(dlopen(nil, RTLD_NOW), "_dispatch_main_q") {
            queue.store(UInt(bitPattern: main), ordering: .releasing)
        }
    }

    /// Called from a block running on the queue: learns the queue object if needed and checks the layout
    /// against the calling thread.
    func confirm(drainingThread tid: Int32) {
        guard !confirmed, mismatches < 3 else { return }
        var address = queue.load(ordering: .acquiring)
        if address == 0, let current = Self.currentQueue?() {
            address = UInt(bitPattern: current)
            queue.store(address, ordering: .releasing)
        }
        guard let object = UnsafeRawPointer(bitPattern: address) else {
            mismatches = 3  // no way to find the queue object
            return
        }
        if sw_dispatch_queue_owner(object, Self.stateOffset) == tid {
            confirmed = true
            usable.store(true, ordering: .releasing)
        } else {
            mismatches += 1
        }
    }

    /// What the drain lock says now.
    enum Reading: Equatable {
        /// The layout is not confirmed (yet, or ever): the lock cannot be read.
        case unavailable
        /// Nobody drains the queue.
        case idle
        /// This thread drains the queue.
        case thread(Int32)
    }

    /// The thread draining the queue now, read from its drain lock.
    var reading: Reading {
        guard usable.load(ordering: .acquiring),
            let object = UnsafeRawPointer(bitPattern: queue.load(ordering: .acquiring))
        else { return .unavailable }
        let tid = sw_dispatch_queue_owner(object, Self.stateOffset)
        return tid == 0 ? .idle : .thread(tid)
    }
}
