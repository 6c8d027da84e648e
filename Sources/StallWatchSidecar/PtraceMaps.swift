// PtraceMaps: another process's /proc/PID/maps ranges read once, shared by many ptrace captures.
import CStallWatchCore
import CStallWatchPtrace
import StallWatch

#if canImport(Glibc)
    import Glibc
#endif

/// The address ranges of `/proc/<pid>/maps`, parsed once so that capturing many threads (the all-threads
/// snapshot) or one thread many times (a stall's samples) does not re-read a file that, in a process of a
/// thousand threads, holds thousands of lines. A stack the ranges do not cover (a thread created since) is
/// looked up in a fresh read by the capture itself.
package final class PtraceMaps: @unchecked Sendable {  // Immutable after init; the C array is freed in deinit.
    let ranges: UnsafeMutablePointer<sw_ptrace_range>?
    let count: Int
    /// When the ranges were read (CLOCK_MONOTONIC, nanoseconds).
    let readAtNanos: UInt64

    /// Reads `/proc/<processID>/maps`; an unreadable file gives no ranges (each capture then reads its own).
    init(processID: Int32) {
        var pointer: UnsafeMutablePointer<sw_ptrace_range>?
        count = sw_ptrace_read_maps(processID, &pointer)
        ranges = pointer
        readAtNanos = sw_monotonic_ns()
    }

    deinit { free(ranges) }

    /// Number of ranges read.
    var rangeCount: Int { count }

    /// Whether the ranges were read more than `nanoseconds` ago.
    func isOlder(thanNanos nanoseconds: UInt64) -> Bool { sw_monotonic_ns() &- readAtNanos > nanoseconds }
}
