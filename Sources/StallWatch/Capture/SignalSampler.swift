// SignalSampler: in-process capture of another thread's registers and stack via a real-time signal.
import CStallWatchSignal

#if canImport(Glibc)
    import Glibc
#endif

/// Captures threads of this process by sending them a real-time signal whose handler copies the registers and
/// the live stack into a preallocated slot.
///
/// One handler serves the whole process: any number of watchdogs (or tests) may capture concurrently, each
/// request in its own slot keyed by the target thread. The handler never allocates, locks or unwinds, so it
/// cannot block on malloc's or the loader's locks; unwinding happens later in ``StackUnwinder``.
///
/// The signal is the first real-time signal from SIGRTMIN+1 whose disposition is still the default, or the one
/// named by the environment variable `STALLWATCH_SAMPLE_SIGNAL` (`SIGRTMIN+3`, `RTMAX-2`, or a number). A
/// signal somebody else handles is never taken over.
///
/// - Warning: The handler runs on the sampled thread, interrupting it wherever it is. It is async-signal-safe
///   (C, no allocation, no lock, errno preserved), but it does interrupt blocking calls: `nanosleep`,
///   `epoll_wait` and similar return early with EINTR (others restart, SA_RESTART), as with any signal.
package final class SignalSampler: Sendable {
    /// The real-time signal the handler is installed for.
    package let signal: Int32
    /// Bytes of stack each capture can hold (the innermost part of deeper stacks is kept).
    let stackBufferSize: Int

    private init(signal: Int32, stackBufferSize: Int) {
        self.signal = signal
        self.stackBufferSize = stackBufferSize
    }

    /// The size of every request slot's stack buffer, fixed when the handler is installed: no capture copies
    /// more (``StallWatchConfiguration/maxStackBytes`` is validated against it).
    static let slotBytes = Int(SW_CAPTURE_DEFAULT_STACK_BYTES)

    private static let installation: Result<SignalSampler, StallWatchError> = install()

    /// The process's sampler, installing the signal handler on first use.
    ///
    /// - Returns: The one sampler of this process.
    /// - Throws: `StallWatchError` `.signalUnavailable` if no real-time signal is free, or if the one named by
    ///   `STALLWATCH_SAMPLE_SIGNAL` is invalid or already handled by someone else. The failure is remembered:
    ///   later calls throw the same error.
    package static func shared() throws(StallWatchError) -> SignalSampler {
        try installation.get()
    }

    private static func install() -> Result<SignalSampler, StallWatchError> {
        var requested: Int32 = 0
        let variable = StallWatchEnvironmentVariable.sampleSignal
        if let text = variable.value {
            guard let signal = parseSignal(text) else {
                return .failure(
                    StallWatchError(
                        .signalUnavailable,
                        "\(variable)=\(text) is not a real-time signal (use SIGRTMIN+N, SIGRTMAX-N or "
                            + "a number from \(__libc_current_sigrtmin()) to \(__libc_current_sigrtmax()))",
                        context: ["variable": variable.name]))
            }
            requested = signal
        }
        let result = sw_capture_install(requested, slotBytes)
        if result > 0 {
            return .success(SignalSampler(signal: result, stackBufferSize: sw_capture_stack_bytes()))
        }
        let which = requested == 0 ? "any free real-time signal" : "signal \(requested)"
        let reason: String
        switch -result {
        case EBUSY:
            reason =
                "signal \(requested) already has a handler (or is ignored) in this process; StallWatch will "
                + "not replace it — set STALLWATCH_SAMPLE_SIGNAL to a free one"
        case EINVAL: reason = "signal \(requested) is not a usable real-time signal"
        case ENOSPC: reason = "every real-time signal from SIGRTMIN+1 to SIGRTMAX-1 is already handled"
        default: reason = "sigaction: \(String(cString: strerror(-result)))"
        }
        return .failure(
            StallWatchError(
                .signalUnavailable, "cannot install the sampling handler for \(which): \(reason)",
                context: ["signal": String(requested)]))
    }

    /// Parses "SIGRTMIN+3", "RTMIN+3", "SIGRTMAX-1", "SIGRTMIN" or "37"; nil if not a real-time signal.
    static func parseSignal(_ text: String) -> Int32? {
        let low = __libc_current_sigrtmin(), high = __libc_current_sigrtmax()
        var rest = Substring(text.uppercased())
        if rest.hasPrefix("SIG") { rest = rest.dropFirst(3) }
        var value: Int32?
        for (name, base) in [("RTMIN", low), ("RTMAX", high)] where rest.hasPrefix(name) {
            rest = rest.dropFirst(name.count)
            if rest.isEmpty {
                value = base
            } else if rest.first == "+", let n = Int32(rest.dropFirst()) {
                value = base + n
            } else if rest.first == "-", let n = Int32(rest.dropFirst()) {
                value = base - n
            } else {
                return nil
            }
        }
        if value == nil { value = Int32(rest) }
        guard let value, value >= low, value <= high else { return nil }
        return value
    }

    /// Prepares the calling thread for sampling and describes it: unblocks the sampling signal in the thread's
    /// signal mask, then returns ``SampledThread/current()``.
    ///
    /// Call it on the thread to be watched. Threads inherit their creator's signal mask, and libdispatch's
    /// worker threads block nearly every signal, so a thread started from one would otherwise never run the
    /// handler (every capture would time out).
    ///
    /// - Returns: The calling thread's id and stack bounds.
    package func registerCurrentThread() -> SampledThread {
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, signal)
        pthread_sigmask(SIG_UNBLOCK, &set, nil)
        return SampledThread.current()
    }

    /// Copies the registers and live stack of `thread`.
    ///
    /// Sends the signal with `tgkill`, then waits (a short spin, then a futex wait) for the handler. If the
    /// handler has not started by the deadline the request is cancelled atomically, so a late handler writes
    /// nothing; a handler already copying is waited for (the copy cannot block) and its result returned.
    /// May be called from any number of threads at once, including for the same target.
    ///
    /// - Parameters:
    ///   - thread: The target, from ``registerCurrentThread()`` (or ``SampledThread/current()``) called on it.
    ///   - timeout: How long the handler may take to run.
    ///   - maxStackBytes: The most stack the handler copies, from SP up (nil or more than ``stackBufferSize``:
    ///     the slot size). A deeper stack keeps its innermost part and the capture notes the truncation.
    /// - Returns: The capture (with `pauseNanoseconds` = signal sent → copy done), or an error:
    ///   `.captureTimedOut` naming the thread's state ("thread state D (disk sleep)"), `.noSuchProcess` if the
    ///   thread is gone, `.captureFailed` if all request slots are busy.
    package func capture(_ thread: SampledThread, timeout: Duration, maxStackBytes: Int? = nil)
        -> Result<StackCapture, StallWatchError>
    {
        capture(thread, timeoutNanos: timeout.nanoseconds, maxStackBytes: maxStackBytes)
    }

    /// ``capture(_:timeout:maxStackBytes:)`` with the timeout in nanoseconds, as the samplers hold it.
    func capture(_ thread: SampledThread, timeoutNanos: UInt64, maxStackBytes: Int? = nil)
        -> Result<StackCapture, StallWatchError>
    {
        var record = sw_capture_record()
        let capacity = min(stackBufferSize, max(0, maxStackBytes ?? stackBufferSize))
        let scratch = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: max(1, capacity))
        defer { scratch.deallocate() }
        let status = CaptureLedger.capturing(processID: getpid(), threadID: thread.threadID) {
            sw_capture_thread(
                thread.threadID, thread.stackLow, thread.stackHigh, thread.boundsAreApproximate ? 1 : 0,
                timeoutNanos, &record,
                scratch.baseAddress, capacity)
        }
        guard Int(status) == SW_CAPTURE_OK else {
            return .failure(error(status, thread: thread, timeoutNanos: timeoutNanos))
        }

        var notes: [String] = []
        if record.flags & Int32(SW_CAPTURE_SP_OUTSIDE_STACK) != 0 {
            notes.append(
                "SP 0x\(String(record.stack_pointer, radix: 16)) was outside the thread's stack "
                    + "0x\(String(thread.stackLow, radix: 16))-0x\(String(thread.stackHigh, radix: 16)) "
                    + "(alternate signal stack or coroutine?): no stack copied")
        }
        if record.flags & Int32(SW_CAPTURE_TRUNCATED) != 0 {
            notes.append("stack copy truncated to its innermost \(record.stack_size) bytes")
        }
        let registers = withUnsafeBytes(of: record.registers) { Array($0.bindMemory(to: UInt64.self)) }
        var capture = StackCapture(
            threadID: thread.threadID, registers: registers, stackPointer: record.stack_pointer,
            stack: Array(UnsafeBufferPointer(rebasing: scratch[..<Int(record.stack_size)])),
            pauseNanoseconds: record.handler_end_ns &- record.sent_ns,
            handlerNanoseconds: record.handler_end_ns &- record.handler_start_ns,
            stackLow: thread.stackLow, stackHigh: thread.stackHigh, notes: notes)
        capture.capturedAtNanoseconds = record.handler_start_ns
        return .success(capture)
    }

    private func error(_ status: Int32, thread: SampledThread, timeoutNanos: UInt64) -> StallWatchError {
        let tid = thread.threadID
        let context = ["threadID": String(tid), "signal": String(signal)]
        switch Int(status) {
        case SW_CAPTURE_TIMED_OUT:
            let state = ProcDirectory(processID: getpid(), threadID: tid).stat()?.state
            var context = context
            if let state { context["threadState"] = String(state) }
            return StallWatchError(
                .captureTimedOut,
                "handler did not run within \(describeNanoseconds(timeoutNanos)); thread state "
                    + ProcStat.describe(state: state)
                    + (state == "D" ? "" : " (is signal \(signal) blocked on thread \(tid)?)"),
                context: context)
        case SW_CAPTURE_NO_SLOT:
            return StallWatchError(
                .captureFailed, "all \(SW_CAPTURE_SLOT_COUNT) capture slots are busy", context: context)
        case SW_CAPTURE_NO_MEMORY:
            return StallWatchError(.captureFailed, "cannot allocate a capture buffer", context: context)
        case SW_CAPTURE_NOT_INSTALLED:
            return StallWatchError(.invalidState, "the sampling handler is not installed", context: context)
        case -Int(ESRCH):
            return StallWatchError(
                .noSuchProcess, "tgkill: no thread \(tid) in this process", context: context, errno: ESRCH)
        default:
            return Syscall.error("tgkill", errno: -status)
        }
    }
}
