// SampledThread: the identity and stack bounds of a thread that a SignalSampler may capture.
import CStallWatchCore
import CStallWatchSignal

/// A thread of this process that can be sampled: its kernel thread id and the bounds of its stack.
///
/// The bounds let the signal handler copy only memory that belongs to the interrupted thread's stack, and let
/// the unwinder refuse reads of the live stack outside the copy.
package struct SampledThread: Sendable, Hashable {
    /// The kernel thread id (`gettid`).
    package var threadID: Int32
    /// Lowest address of the thread's stack (inclusive).
    package var stackLow: UInt64
    /// One past the highest address of the thread's stack (the stack grows down from here).
    package var stackHigh: UInt64

    /// The bounds were read from `/proc/self/maps` (a thread that never registered) and may be stale: the
    /// handler then copies with `process_vm_readv`, which cannot fault, instead of `memcpy`.
    var boundsAreApproximate: Bool

    package init(threadID: Int32, stackLow: UInt64, stackHigh: UInt64, boundsAreApproximate: Bool = false) {
        self.threadID = threadID
        self.stackLow = stackLow
        self.stackHigh = stackHigh
        self.boundsAreApproximate = boundsAreApproximate
    }

    /// Describes the calling thread; call it on the thread that will be sampled (for example the loop thread,
    /// when its run loop starts).
    ///
    /// Uses `gettid` and `pthread_getattr_np`; for the main thread glibc derives the bounds from the `[stack]`
    /// mapping and `RLIMIT_STACK`. If the bounds cannot be read they are 0/0, and every capture of the thread
    /// will then carry registers but no stack.
    ///
    /// - Returns: The calling thread's id and stack bounds.
    package static func current() -> SampledThread {
        var low: UInt64 = 0, high: UInt64 = 0
        let tid = sw_gettid()
        guard sw_capture_current_stack(&low, &high) == 0 else {
            return SampledThread(threadID: tid, stackLow: 0, stackHigh: 0)
        }
        return SampledThread(threadID: tid, stackLow: low, stackHigh: high)
    }
}
