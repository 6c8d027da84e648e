// ThreadCaptureHelper: capture of any thread of this process without interrupting it, through a ptrace helper.
import CStallWatchCore
import CStallWatchPtrace

#if canImport(Glibc)
    import Glibc
#endif

/// Captures threads of this process without a signal: a helper process, cloned once (raw system calls only,
/// no SIGCHLD, invisible to the application's `wait`), stops the thread with `PTRACE_SEIZE` +
/// `PTRACE_INTERRUPT`, copies its registers and stack into shared memory with one `process_vm_readv` and
/// detaches at once. The copy is unwound by ``StackUnwinder`` like a signal-path copy.
///
/// Unlike a signal, a ptrace stop makes no blocking call of the thread fail: `poll`, `nanosleep`,
/// `sem_timedwait`, timed futex waits and socket reads with `SO_RCVTIMEO` are restarted by the kernel and last
/// their full time (no EINTR). It reaches threads that block every signal (libdispatch workers, the Swift
/// Concurrency pool, signalfd loops) and does not depend on any signal's disposition.
///
/// Any watcher may call ``capture(threadID:stackLow:stackHigh:maxStackBytes:timeout:)`` for any thread of this
/// process, from any thread; requests are served one at a time. Each capture costs the thread a pause of tens
/// of microseconds (interrupt → detach) and two voluntary context switches.
///
/// Where ptrace is refused (seccomp filters, containers without `CAP_SYS_PTRACE` and a strict Yama policy, a
/// debugger already attached), ``shared()`` throws `.permissionDenied`, decided once by a probe capture of the
/// calling thread.
package final class ThreadCaptureHelper: Sendable {
    /// The report's `capture.method` for samples taken this way.
    package static let captureMethod = CaptureMethod.ptraceHelper

    private static let installation: Result<ThreadCaptureHelper, StallWatchError> = install()

    private init() {}

    /// The process's helper, started (and probed with a capture of the calling thread) on first use.
    ///
    /// - Returns: The one helper of this process.
    /// - Throws: `StallWatchError` `.permissionDenied` if ptrace is refused, `.captureFailed` if the helper
    ///   cannot be started. The outcome is remembered: later calls throw the same error.
    package static func shared() throws(StallWatchError) -> ThreadCaptureHelper {
        try installation.get()
    }

    private static func install() -> Result<ThreadCaptureHelper, StallWatchError> {
        let disabled = StallWatchEnvironmentVariable.noPtraceHelper
        if disabled.value != nil {
            return .failure(
                StallWatchError(
                    .permissionDenied, "the ptrace helper is disabled by \(disabled)",
                    context: ["variable": disabled.name]))
        }
        let started = sw_helper_start(SignalSampler.slotBytes)
        guard started > 0 else {
            return .failure(Syscall.error("clone (capture helper)", errno: -started))
        }
        let helper = ThreadCaptureHelper()
        switch helper.capture(threadID: sw_gettid(), maxStackBytes: 4096, timeoutNanos: 500_000_000) {
        case .success: return .success(helper)
        case .failure(let error):
            sw_helper_stop()
            return .failure(error)
        }
    }

    /// The helper process's id while it runs (0 between a helper's exit and the next capture).
    var helperProcessID: Int32 { sw_helper_pid() }

    /// Copies the registers and stack of thread `threadID` of this process while it is stopped for a few
    /// microseconds by ptrace; the thread never runs a handler and sees no EINTR.
    ///
    /// - Parameters:
    ///   - threadID: A thread of this process (`gettid`), including the calling one.
    ///   - stackLow: Lowest address of its stack, or 0 if unknown.
    ///   - stackHigh: One past its highest stack address, or 0 if unknown (then `maxStackBytes` from SP are
    ///     read, up to the first unmapped page).
    ///   - maxStackBytes: The most stack to copy, from SP up (at most ``SignalSampler/slotBytes``).
    ///   - timeout: How long the thread may take to reach the stop (a thread in uninterruptible sleep does not).
    /// - Returns: The capture (`pauseNanoseconds` = interrupt requested → detached), or `.permissionDenied`,
    ///   `.noSuchProcess`, `.captureTimedOut` (naming the thread's state), `.captureFailed` (the helper could
    ///   not be started or stopped answering).
    package func capture(
        threadID: Int32, stackLow: UInt64 = 0, stackHigh: UInt64 = 0, maxStackBytes: Int, timeout: Duration
    ) -> Result<StackCapture, StallWatchError> {
        capture(
            threadID: threadID, stackLow: stackLow, stackHigh: stackHigh, maxStackBytes: maxStackBytes,
            timeoutNanos: timeout.nanoseconds)
    }

    /// The capture with the timeout in nanoseconds, as the samplers hold it.
    func capture(
        threadID: Int32, stackLow: UInt64 = 0, stackHigh: UInt64 = 0, maxStackBytes: Int, timeoutNanos: UInt64
    ) -> Result<StackCapture, StallWatchError> {
        var record = sw_ptrace_record()
        let capacity = max(1, min(maxStackBytes, SignalSampler.slotBytes))
        let scratch = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: capacity)
        defer { scratch.deallocate() }
        let status = CaptureLedger.capturing(processID: getpid(), threadID: threadID) {
            sw_helper_capture(
                threadID, stackLow, stackHigh, timeoutNanos, &record, scratch.baseAddress,
                capacity)
        }
        return StackCapture.fromPtraceRecord(
            record, status: status, threadID: threadID, stack: scratch, pauseNanoseconds: record.pause_ns,
            detachNote: "PTRACE_DETACH failed; the helper's exit detached instead"
        ) { error($0, threadID: threadID, timeoutNanos: timeoutNanos) }
    }

    /// Captures `thread` (its registered stack bounds bound the copy).
    package func capture(_ thread: SampledThread, maxStackBytes: Int, timeoutNanos: UInt64)
        -> Result<StackCapture, StallWatchError>
    {
        capture(
            threadID: thread.threadID, stackLow: thread.stackLow, stackHigh: thread.stackHigh,
            maxStackBytes: maxStackBytes, timeoutNanos: timeoutNanos)
    }

    private func error(_ record: sw_ptrace_record, threadID: Int32, timeoutNanos: UInt64) -> StallWatchError {
        let err = record.failed_errno
        let context = ["threadID": String(threadID), "helper": String(sw_helper_pid())]
        switch (record.failed_step, err) {
        case (SW_PTRACE_STEP_THREAD, _):
            return StallWatchError(
                .captureFailed,
                "the capture helper " + (err == ETIMEDOUT ? "stopped answering and was killed" : "could not start")
                    + " (\(String(cString: strerror(err))))", context: context, errno: err)
        case (_, ESRCH):
            return StallWatchError(
                .noSuchProcess, "no thread \(threadID) in this process", context: context, errno: ESRCH)
        case (_, EPERM):
            return StallWatchError(
                .permissionDenied,
                "ptrace of this process's thread \(threadID) by its capture helper was refused: a seccomp filter "
                    + "or container policy may forbid ptrace, Yama may refuse it, or a debugger is already "
                    + "attached (TracerPid in /proc/self/status)", context: context, errno: EPERM)
        case (SW_PTRACE_STEP_STOP, ETIMEDOUT), (SW_PTRACE_STEP_STOP, EAGAIN):
            let state = ProcDirectory(processID: getpid(), threadID: threadID).stat()?.state
            let why = UnstoppedThread(record: record) ?? .timedOut
            return why.error(
                target: "thread \(threadID)", state: state, timeoutNanos: timeoutNanos, context: context)
        default:
            return Syscall.error("ptrace (capture helper)", errno: err)
        }
    }
}
