// Finding another thread's stack bounds, so that any thread of this process can be sampled.

/// Describes threads of this process that never registered themselves (``SignalSampler/registerCurrentThread()``)
/// so their stacks can be captured too: the stack is the mapping that contains the thread's stack pointer.
///
/// The stack pointer comes from `/proc/self/task/<tid>/syscall` for a thread blocked in a system call (most
/// threads, most of the time); for a running thread, from a first capture of its registers alone.
struct ThreadStackLocator {
    /// Readable, writable mappings: stacks (guard pages and code are neither).
    private var mappings: [ProcMapping] = []

    init() {
        mappings = (ProcDirectory.current.maps() ?? []).filter { $0.isReadable && $0.isWritable }
    }

    /// The readable, writable mapping containing `address`.
    func mapping(containing address: UInt64) -> (start: UInt64, end: UInt64)? {
        mappings.first { $0.contains(address) }.map { ($0.start, $0.end) }
    }

    /// Thread `tid` with the bounds of the mapping its stack pointer is in; nil when they cannot be found.
    func thread(_ tid: Int32, sampler: SignalSampler, timeoutNanos: UInt64) -> SampledThread? {
        var sp = Self.blockedStackPointer(tid)
        if sp == nil,
            case .success(let registersOnly) = sampler.capture(
                SampledThread(threadID: tid, stackLow: 0, stackHigh: 0), timeoutNanos: timeoutNanos)
        {
            sp = registersOnly.stackPointer
        }
        guard let sp, let region = mapping(containing: sp) else { return nil }
        return SampledThread(threadID: tid, stackLow: region.start, stackHigh: region.end, boundsAreApproximate: true)
    }

    /// Whether thread `tid` blocks `signal` (`SigBlk` in its status): such a thread can never run the handler, so
    /// asking it would only wait out the timeout. libdispatch's worker threads block nearly every signal.
    static func blocks(_ tid: Int32, signal: Int32) -> Bool {
        guard signal > 0, let mask = ProcDirectory.current.thread(tid).status()?.blockedSignals else { return false }
        return mask & (1 << UInt64(signal - 1)) != 0
    }

    /// The stack pointer of a thread that is not running (its `syscall` file's second-to-last field: in a system
    /// call, or blocked outside one); nil for a running thread.
    static func blockedStackPointer(_ tid: Int32) -> UInt64? {
        guard let wait = ProcDirectory.current.thread(tid).syscall(), wait.stackPointer != 0 else { return nil }
        return wait.stackPointer
    }
}
