// Finding another thread's stack bounds, so that any thread of this process can be sampled.

/// Describes threads of this process that never registered themselves (``SignalSampler/registerCurrentThread()``)
/// so their stacks can be captured too: the stack is the mapping that contains the thread's stack pointer.
///
/// The stack pointer comes from `/proc/self/task/<tid>/syscall` for a thread blocked in a system call (most
/// threads, most of the time); for a running thread, from a first capture of its registers alone.
struct ThreadStackLocator {
    private var mappings: [(start: UInt64, end: UInt64)] = []

    init() {
        guard let text = ProcFile.text("/proc/self/maps") else { return }
        for line in text.split(separator: "\n") {
            guard let dash = line.firstIndex(of: "-"), let space = line.firstIndex(of: " ") else { continue }
            let perms = line[line.index(after: space)...].prefix(4)
            // Stacks are readable and writable; skip guard pages and code.
            guard perms.hasPrefix("rw"), let start = UInt64(line[..<dash], radix: 16),
                let end = UInt64(line[line.index(after: dash)..<space], radix: 16)
            else { continue }
            mappings.append((start, end))
        }
    }

    /// The readable, writable mapping containing `address`.
    func mapping(containing address: UInt64) -> (start: UInt64, end: UInt64)? {
        mappings.first { $0.start <= address && address < $0.end }
    }

    /// Thread `tid` with the bounds of the mapping its stack pointer is in; nil when they cannot be found.
    func thread(_ tid: Int32, sampler: SignalSampler, timeout: Duration) -> SampledThread? {
        var sp = Self.blockedStackPointer(tid)
        if sp == nil,
            case .success(let registersOnly) = sampler.capture(
                SampledThread(threadID: tid, stackLow: 0, stackHigh: 0), timeout: timeout)
        {
            sp = registersOnly.stackPointer
        }
        guard let sp, let region = mapping(containing: sp) else { return nil }
        return SampledThread(threadID: tid, stackLow: region.start, stackHigh: region.end, boundsAreApproximate: true)
    }

    /// Whether thread `tid` blocks `signal` (`SigBlk` in its status): such a thread can never run the handler, so
    /// asking it would only wait out the timeout. libdispatch's worker threads block nearly every signal.
    static func blocks(_ tid: Int32, signal: Int32) -> Bool {
        guard let status = ProcFile.text("/proc/self/task/\(tid)/status"),
            let mask = ProcFile.statusField(status, "SigBlk").flatMap({ UInt64($0, radix: 16) }), signal > 0
        else { return false }
        return mask & (1 << UInt64(signal - 1)) != 0
    }

    /// The stack pointer of a thread blocked in a system call: the second-to-last field of its syscall file.
    static func blockedStackPointer(_ tid: Int32) -> UInt64? {
        guard let line = ProcFile.text("/proc/self/task/\(tid)/syscall") else { return nil }
        let parts = line.split(separator: " ")
        guard parts.count >= 3, parts[0] != "running" else { return nil }
        return UInt64(hexAddress: String(parts[parts.count - 2]))
    }
}
