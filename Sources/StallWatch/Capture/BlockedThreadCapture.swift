// BlockedThreadCapture: a stack sample of a thread blocked in a system call that even a ptrace stop would cut short.
import CStallWatchCore

#if canImport(Glibc)
    import Glibc
#endif

/// Captures a thread that is blocked in a system call without touching the thread at all: one of this process in a
/// call which a ptrace stop would make fail with EINTR, or one of any process that cannot stop before its call
/// ends (uninterruptible sleep: an fsync waiting for writeback, a close freeing a deleted file's blocks).
///
/// A ptrace stop is transparent for most blocking calls (the kernel restarts `poll`, `nanosleep`, futex waits,
/// `select`, `read` on a pipe), but not for a few that return EINTR after any stop (signal(7), "Interruption of
/// system calls and library functions by stop signals"): socket calls with `SO_RCVTIMEO`/`SO_SNDTIMEO`,
/// `epoll_wait`, `semop`/`semtimedop`, `sigtimedwait`, `io_getevents`, `read` from inotify. For those the
/// thread is left alone: while it sits in the kernel its user stack cannot change, so the stack is copied from
/// the process's memory (`process_vm_readv`) and the registers come from `/proc/<pid>/task/TID/syscall` (PC, SP
/// and the six arguments). The frame pointer is not there; it is recovered from the copy as the innermost frame record
/// (`[rbp]` = the caller's `rbp` above it, `[rbp+8]` = an address in code) so frame-pointer callers (all Swift
/// code) unwind.
package enum BlockedThreadCapture {
    /// The thread's system call (from `/proc/self/task/TID/syscall`: number, arguments, stack pointer and program
    /// counter), or nil if it runs in user space (or the file cannot be read).
    package static func blocked(_ tid: Int32, processID: Int32 = getpid()) -> ThreadWait? {
        guard let wait = ProcDirectory(processID: processID, threadID: tid).syscall(), wait.inSyscall,
            wait.arguments.count == 6, wait.stackPointer != 0
        else { return nil }
        return wait
    }

    /// The name of the call if a ptrace stop would make it return EINTR, else nil.
    static func interruptedByStop(_ call: ThreadWait, processID: Int32 = getpid()) -> String? {
        guard let number = call.number else { return nil }
        let name = SyscallTable.name(number)
        switch name {
        case "epoll_wait", "epoll_pwait", "epoll_pwait2", "semop", "semtimedop", "rt_sigtimedwait",
            "io_getevents", "io_pgetevents", "recvfrom", "recvmsg", "recvmmsg", "sendto", "sendmsg", "sendmmsg",
            "accept", "accept4", "connect":
            return name
        case "read", "readv", "write", "writev":
            // On a socket (a timeout may be set) or an inotify descriptor.
            let fd = Int32(truncatingIfNeeded: call.arguments[0])
            var buffer = [CChar](repeating: 0, count: 64)
            let length = readlink("/proc/\(processID)/fd/\(fd)", &buffer, buffer.count - 1)
            guard length > 0 else { return nil }
            let target = String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
            return target.hasPrefix("socket:") || target.contains("inotify") ? "\(name) on \(target)" : nil
        default:
            return nil
        }
    }

    /// Copies the stack of the blocked thread (of process `processID`) and builds its registers; nil if the stack
    /// cannot be read, or the thread left its call meanwhile.
    ///
    /// - Parameter stillThere: Whether the thread is still where `call` found it, asked after the copy; by default,
    ///   its `syscall` file shows it blocked in the call at the same place.
    package static func capture(
        _ thread: SampledThread, _ call: ThreadWait, maxStackBytes: Int, processID: Int32 = getpid(),
        stillThere: (() -> Bool)? = nil
    ) -> StackCapture? {
        let maps = ProcDirectory(processID: processID).maps() ?? []
        var low = thread.stackLow, high = thread.stackHigh
        if !(low..<high).contains(call.stackPointer), let region = maps.first(where: { $0.contains(call.stackPointer) })
        {
            (low, high) = (region.start, region.end)
        }
        guard (low..<high).contains(call.stackPointer) else { return nil }
        let length = Int(min(UInt64(max(0, maxStackBytes)), high - call.stackPointer))
        var stack = [UInt8](repeating: 0, count: length)
        let got = stack.withUnsafeMutableBytes {
            sw_read_memory(processID, call.stackPointer, $0.baseAddress, UInt($0.count))
        }
        guard got > 0 else { return nil }
        stack.removeLast(length - got)
        // Still in the same call at the same place: the copy is of a stack that did not move meanwhile.
        if let stillThere {
            guard stillThere() else { return nil }
        } else {
            guard let again = blocked(thread.threadID, processID: processID), again.stackPointer == call.stackPointer,
                again.programCounter == call.programCounter
            else { return nil }
        }
        let seenAt = sw_monotonic_ns()
        let code = ExecutableRanges(maps)
        var registers = [UInt64](repeating: 0, count: StackCapture.registerCount)
        // The system call's number in rax, its arguments in rdi rsi rdx r10 r8 r9 (the kernel's convention).
        let order = [SW_REG_RDI, SW_REG_RSI, SW_REG_RDX, SW_REG_R10, SW_REG_R8, SW_REG_R9]
        registers[Int(SW_REG_RAX)] = UInt64(call.number ?? 0)
        for (register, argument) in zip(order, call.arguments) { registers[Int(register)] = argument }
        registers[Int(SW_REG_RSP)] = call.stackPointer
        registers[Int(SW_REG_RIP)] = call.programCounter
        let records = frameRecords(in: stack, base: call.stackPointer, high: high, code: code, limit: 3)
        registers[Int(SW_REG_RBP)] = records.first ?? 0
        var capture = StackCapture(
            threadID: thread.threadID, registers: registers, stackPointer: call.stackPointer, stack: stack,
            pauseNanoseconds: 0, handlerNanoseconds: 0, stackLow: low, stackHigh: high)
        // Still in the call, at the same place, after the copy: its state then.
        capture.capturedAtNanoseconds = seenAt
        capture.otherFramePointers = Array(records.dropFirst())
        return capture
    }

    /// The innermost frame record in the copy: an address W with [W] a higher stack address (the caller's
    /// record, or 0 at the outermost) and [W+8] and [[W]+8] addresses in code.
    static func frameRecord(in stack: [UInt8], base: UInt64, high: UInt64, code: ExecutableRanges) -> UInt64? {
        frameRecords(in: stack, base: base, high: high, code: code, limit: 1).first
    }

    /// The innermost `limit` addresses of the copy that look like frame records, innermost first. The innermost is
    /// not always the live one: a leaf without a frame pointer of its own (libc's `fsync` keeps a 24-byte frame)
    /// sits over the slots of an earlier callee's frame, whose stale record looks live and leads the unwind back to
    /// the same caller; the unwind tries the next ones.
    static func frameRecords(
        in stack: [UInt8], base: UInt64, high: UInt64, code: ExecutableRanges, limit: Int
    ) -> [UInt64] {
        func word(_ address: UInt64) -> UInt64? {
            guard address >= base, address + 8 <= base + UInt64(stack.count) else { return nil }
            let offset = Int(address - base)
            return stack.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset, as: UInt64.self) }
        }
        var found: [UInt64] = []
        var candidate = base
        while candidate + 16 <= base + UInt64(stack.count), found.count < limit {
            defer { candidate += 8 }
            guard let next = word(candidate), next > candidate, next < high, let ret = word(candidate + 8),
                code.contains(ret)
            else { continue }
            if let outer = word(next + 8), code.contains(outer) { found.append(candidate) }
        }
        return found
    }
}

/// The executable mappings of a process, from its `maps`.
struct ExecutableRanges {
    private var ranges: [Range<UInt64>] = []

    /// This process's.
    init() { self.init(ProcDirectory.current.maps() ?? []) }

    init(_ maps: [ProcMapping]) { ranges = maps.filter(\.isExecutable).map(\.range) }

    func contains(_ address: UInt64) -> Bool { ranges.contains { $0.contains(address) } }
}
