// WaitDescriptors: the descriptors a blocked call waits on, and its timeout, read from its arguments.
import CStallWatchCore

/// The descriptors behind a blocked call — the one of a `read`/`recv`, the array of a `poll`, the read set of a
/// `select`, the interest list of an `epoll_wait` — and the call's timeout, read from the thread's arguments and
/// its process's memory (`process_vm_readv`) and `fdinfo`. Reads only.
struct WaitDescriptors: Sendable, Hashable {
    /// The descriptors, at most ``limit``.
    var descriptors: [Int32]
    /// The call reads (a read, or a wait for readability); false for a write.
    var reading: Bool
    /// The call's timeout in milliseconds; nil when it has none (or it could not be read).
    var timeoutMs: Int64?
    /// The call waits on a set of descriptors (poll, select, epoll) rather than on one.
    var isEventWait: Bool

    /// The most descriptors read from a set: a wake-up or peer question needs few.
    static let limit = 64

    static let readCalls: Set<Int> = [0, 17, 19, 45, 47, 295, 299, 327]
    static let writeCalls: Set<Int> = [1, 18, 20, 44, 46, 296, 307, 328]

    /// What `wait` (a thread of process `pid`) waits on; nil for a call on no descriptor or unreadable arguments.
    static func read(pid: Int32, wait: ThreadWait) -> WaitDescriptors? {
        guard let number = wait.number, wait.arguments.count == 6 else { return nil }
        let a = wait.arguments
        if let fd = wait.descriptor, fd < 1 << 31 {
            guard readCalls.contains(number) || writeCalls.contains(number) else { return nil }
            return .init(
                descriptors: [Int32(fd)], reading: readCalls.contains(number), timeoutMs: nil, isEventWait: false)
        }
        switch number {
        case 7, 271:  // poll(fds, nfds, ms), ppoll(fds, nfds, timespec*, …)
            let count = Int(min(a[1], UInt64(limit)))
            guard count > 0, let bytes = memory(pid, a[0], count * 8) else { return nil }
            let fds = (0..<count).compactMap { i -> Int32? in
                let fd = Int32(littleEndian: bytes, at: i * 8)
                let events = Int16(truncatingIfNeeded: Int32(littleEndian: bytes, at: i * 8 + 4))
                return fd >= 0 && events & 0x1 != 0 ? fd : nil  // POLLIN
            }
            let timeout = number == 7 ? milliseconds(poll: a[2]) : milliseconds(timespecAt: a[2], pid: pid)
            return .init(descriptors: fds, reading: true, timeoutMs: timeout, isEventWait: true)
        case 23, 270:  // select(nfds, r, w, e, timeval*), pselect6(…, timespec*, …)
            let nfds = Int(min(a[0], 1024))
            guard nfds > 0, a[1] != 0, let bytes = memory(pid, a[1], (nfds + 63) / 64 * 8) else { return nil }
            var fds: [Int32] = []
            for fd in 0..<nfds where fds.count < limit {
                let bit = UInt8(1) << UInt8(fd % 8)
                if bytes[fd / 8] & bit != 0 { fds.append(Int32(fd)) }
            }
            let timeout =
                number == 23 ? milliseconds(timevalAt: a[4], pid: pid) : milliseconds(timespecAt: a[4], pid: pid)
            return .init(descriptors: fds, reading: true, timeoutMs: timeout, isEventWait: true)
        case 232, 281, 441:  // epoll_wait(epfd, events, max, ms), epoll_pwait, epoll_pwait2(…, timespec*, …)
            guard a[0] < 1 << 31, let fds = ProcDirectory(processID: pid).epollTargets(Int32(a[0])) else { return nil }
            let timeout = number == 441 ? milliseconds(timespecAt: a[3], pid: pid) : milliseconds(poll: a[3])
            return .init(descriptors: Array(fds.prefix(limit)), reading: true, timeoutMs: timeout, isEventWait: true)
        default:
            return nil
        }
    }

    /// An `int` timeout in milliseconds: negative is none.
    static func milliseconds(poll value: UInt64) -> Int64? {
        let ms = Int32(truncatingIfNeeded: value)
        return ms < 0 ? nil : Int64(ms)
    }

    /// A `struct timespec *` timeout: a null pointer is none.
    static func milliseconds(timespecAt address: UInt64, pid: Int32) -> Int64? {
        milliseconds(secondsAndFractionAt: address, pid: pid, fractionsPerSecond: 1_000_000_000)
    }

    /// A `struct timeval *` timeout (select): a null pointer is none.
    static func milliseconds(timevalAt address: UInt64, pid: Int32) -> Int64? {
        milliseconds(secondsAndFractionAt: address, pid: pid, fractionsPerSecond: 1_000_000)
    }

    /// Two 64-bit words, seconds then a fraction of a second in `fractionsPerSecond` units (timespec, timeval).
    private static func milliseconds(secondsAndFractionAt address: UInt64, pid: Int32, fractionsPerSecond: Int64)
        -> Int64?
    {
        guard address != 0, let bytes = memory(pid, address, 16) else { return nil }
        let seconds = Int64(littleEndian: bytes, at: 0)
        let fraction = Int64(littleEndian: bytes, at: 8)
        guard seconds >= 0, seconds < 1 << 40, fraction >= 0, fraction < fractionsPerSecond else { return nil }
        return seconds * 1000 + fraction / (fractionsPerSecond / 1000)
    }

    static func memory(_ pid: Int32, _ address: UInt64, _ count: Int) -> [UInt8]? {
        guard address != 0, count > 0 else { return nil }
        var bytes = [UInt8](repeating: 0, count: count)
        let n = bytes.withUnsafeMutableBytes { sw_read_memory(pid, address, $0.baseAddress, UInt(count)) }
        return n == count ? bytes : nil
    }
}

extension FixedWidthInteger {
    /// The little-endian value at `offset` of `bytes` (which must hold it).
    fileprivate init(littleEndian bytes: [UInt8], at offset: Int) {
        var value = Self.zero
        for i in 0..<(Self.bitWidth / 8) { value |= Self(truncatingIfNeeded: bytes[offset + i]) << (8 * i) }
        self = value
    }
}
