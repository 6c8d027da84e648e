// PtraceSampler: out-of-process capture of one thread's registers and stack for the sidecar.
import CStallWatchPtrace
import StallWatch

#if canImport(Glibc)
    import Glibc
#endif

/// Captures a thread of another process with ptrace: `PTRACE_SEIZE` + `PTRACE_INTERRUPT` on that one thread,
/// `PTRACE_GETREGS`, one `process_vm_readv` of its stack (bounded by the mapping that holds SP), and
/// `PTRACE_DETACH` at once. Never `PTRACE_ATTACH`, `SIGSTOP` or `SIGQUIT`: if the sidecar dies mid-capture the
/// kernel detaches and the target runs on.
///
/// The ptrace work runs on a short-lived helper thread that is the tracer, so even a thread that never stops
/// (uninterruptible sleep) is released at the deadline: the helper exits and the kernel detaches. Signals that
/// arrive during the stop are passed on at detach.
package final class PtraceSampler: Sendable {
    package let processID: Int32
    /// How long to wait for the thread to stop after `PTRACE_INTERRUPT`, nanoseconds.
    package let timeoutNanos: UInt64
    /// How long to wait for the thread to stop after `PTRACE_INTERRUPT`.
    package var timeout: Duration { .nanoseconds(Int64(clamping: timeoutNanos)) }

    /// - Parameters:
    ///   - processID: The process to sample (not this one: a process cannot trace its own threads).
    ///   - timeout: How long to wait for a thread to stop.
    package convenience init(processID: Int32, timeout: Duration = .milliseconds(250)) {
        self.init(processID: processID, timeoutNanos: timeout.nanoseconds)
    }

    /// A sampler whose captures wait `timeoutNanos` for the thread to stop.
    package init(processID: Int32, timeoutNanos: UInt64) {
        self.processID = processID
        self.timeoutNanos = timeoutNanos
    }

    /// Stops thread `threadID` of the process briefly and copies its registers and stack.
    ///
    /// - Parameters:
    ///   - threadID: The thread (the main thread's id is the process id).
    ///   - maxStackBytes: The most stack to copy, from SP up.
    /// - Returns: The capture, with `pauseNanoseconds` = the pause as the target sees it (interrupt requested →
    ///   detached, plus the run-queue wait its schedstat shows until it ran again) and the stack mapping's
    ///   bounds in `stackLow`/`stackHigh`; a failed stack read is a note, not an error. Errors:
    ///   `.noSuchProcess` (ESRCH), `.permissionDenied` (EPERM, with the usual reasons), `.captureTimedOut`
    ///   (the thread did not stop; names its state, and in `context["unstopped"]` why: ``UnstoppedThread``; a
    ///   thread that cannot stop soon is released at once), `.systemCall` otherwise.
    ///   - maps: The process's maps read beforehand (shared by many captures); nil reads them for this one.
    package func capture(threadID: Int32, maxStackBytes: Int, maps: PtraceMaps? = nil)
        -> Result<StackCapture, StallWatchError>
    {
        var record = sw_ptrace_record()
        let capacity = max(0, maxStackBytes)
        let scratch = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: max(1, capacity))
        defer { scratch.deallocate() }
        // Job control waits for the detach (CaptureGate): a suspended sidecar never holds the target stopped.
        let status = CaptureGate.capturing {
            CaptureLedger.capturing(processID: processID, threadID: threadID) {
                if let maps {
                    sw_ptrace_capture_with_maps(
                        processID, threadID, timeoutNanos, scratch.baseAddress, capacity, maps.ranges, maps.count,
                        &record)
                } else {
                    sw_ptrace_capture(processID, threadID, timeoutNanos, scratch.baseAddress, capacity, &record)
                }
            }
        }
        withExtendedLifetime(maps) {}
        return StackCapture.fromPtraceRecord(
            record, status: status, threadID: threadID, stack: scratch, pauseNanoseconds: record.seen_pause_ns,
            detachNote: "PTRACE_DETACH failed (\(String(cString: strerror(record.failed_errno)))); the tracer "
                + "thread's exit detached instead"
        ) { error($0, threadID: threadID) }
    }

    private func error(_ record: sw_ptrace_record, threadID: Int32) -> StallWatchError {
        let err = record.failed_errno
        let target = threadID == processID ? "pid \(processID)" : "pid \(processID) thread \(threadID)"
        let context = ["pid": String(processID), "threadID": String(threadID)]
        let call: String
        switch record.failed_step {
        case SW_PTRACE_STEP_SEIZE: call = "ptrace(PTRACE_SEIZE)"
        case SW_PTRACE_STEP_INTERRUPT: call = "ptrace(PTRACE_INTERRUPT)"
        case SW_PTRACE_STEP_GETREGS: call = "ptrace(PTRACE_GETREGS)"
        case SW_PTRACE_STEP_DETACH: call = "ptrace(PTRACE_DETACH)"
        case SW_PTRACE_STEP_THREAD: call = "pthread_create"
        default: call = "waiting for the ptrace stop"
        }
        switch err {
        case ESRCH:
            return StallWatchError(
                .noSuchProcess, "\(call): no such process or thread: \(target)",
                context: context.merging(["call": call]) { $1 }, errno: ESRCH)
        case EPERM:
            return StallWatchError(
                .permissionDenied,
                "\(call) of \(target) not permitted: tracing needs the same user as the target (and no setuid/"
                    + "capability gain) or CAP_SYS_PTRACE; Yama (/proc/sys/kernel/yama/ptrace_scope ≥ 1) may allow "
                    + "only ancestors; containers often drop CAP_SYS_PTRACE or filter ptrace with seccomp; the "
                    + "target may already be traced (see TracerPid in /proc/\(processID)/status); a process "
                    + "cannot trace its own threads",
                context: context.merging(["call": call]) { $1 }, errno: EPERM)
        case ETIMEDOUT, EAGAIN:
            let state = ProcDirectory(processID: processID, threadID: threadID).stat()?.state
            let why = UnstoppedThread(record: record) ?? .timedOut
            return why.error(target: target, state: state, timeoutNanos: timeoutNanos, context: context)
        default:
            return Syscall.error(call, errno: err)
        }
    }
}
