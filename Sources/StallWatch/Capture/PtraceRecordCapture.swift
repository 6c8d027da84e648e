// PtraceRecordCapture: one reading of a ptrace capture record, for the sidecar's tracer and the capture helper.
import CStallWatchPtrace

#if canImport(Glibc)
    import Glibc
#endif

extension StackCapture {
    /// The capture a ptrace record describes, or the error it ends in.
    ///
    /// A stack that could not be read still yields the registers, and a failed `PTRACE_DETACH` after the stop
    /// (the tracer's exit detached instead) still yields the whole capture; each says so in `notes`. Any other
    /// failed step is `failure(record)`.
    ///
    /// - Parameters:
    ///   - record: What the C capture filled in; `status` is its return value.
    ///   - stack: The buffer the stack was copied into (its first `record.stack_size` bytes are the copy).
    ///   - pauseNanoseconds: The pause figure to report (the caller's choice of the record's measures).
    ///   - detachNote: The note for a detach that the tracer's exit did instead.
    package static func fromPtraceRecord(
        _ record: sw_ptrace_record, status: Int32, threadID: Int32, stack: UnsafeMutableBufferPointer<UInt8>,
        pauseNanoseconds: UInt64, detachNote: String, failure: (sw_ptrace_record) -> StallWatchError
    ) -> Result<StackCapture, StallWatchError> {
        var notes: [String] = []
        if status != 0 {
            switch record.failed_step {
            case SW_PTRACE_STEP_READ_STACK:
                notes.append("stack not read: \(String(cString: strerror(record.failed_errno))) (registers only)")
            case SW_PTRACE_STEP_DETACH where record.pause_ns > 0:
                notes.append(detachNote)
            default:
                return .failure(failure(record))
            }
        }
        if record.truncated != 0 { notes.append("stack copy truncated to its innermost \(record.stack_size) bytes") }
        if record.pending_signal != 0 {
            notes.append("thread stopped for signal \(record.pending_signal), which was re-delivered at detach")
        }
        let registers = withUnsafeBytes(of: record.registers) { Array($0.bindMemory(to: UInt64.self)) }
        var capture = StackCapture(
            threadID: threadID, registers: registers, stackPointer: record.stack_pointer,
            stack: Array(UnsafeBufferPointer(rebasing: stack[..<Int(record.stack_size)])),
            pauseNanoseconds: pauseNanoseconds, handlerNanoseconds: 0, stackLow: record.stack_low,
            stackHigh: record.stack_high, notes: notes, stopWaitNanoseconds: record.stop_wait_ns)
        capture.restartedCall = record.restarted_call != 0
        capture.stopSyscall = record.stop_syscall >= 0 ? Int(record.stop_syscall) : nil
        capture.capturedAtNanoseconds = record.stopped_at_ns
        return .success(capture)
    }
}

extension UnstoppedThread {
    /// Why a record's capture did not stop the thread, when its failed step is the wait for the stop.
    package init?(record: sw_ptrace_record) {
        guard record.failed_step == SW_PTRACE_STEP_STOP else { return nil }
        switch Int(record.unstopped) {
        case Int(SW_PTRACE_UNSTOPPED_UNINTERRUPTIBLE.rawValue): self = .uninterruptible
        case Int(SW_PTRACE_UNSTOPPED_IN_KERNEL.rawValue): self = .workingInKernel
        case Int(SW_PTRACE_UNSTOPPED_TIMEOUT.rawValue): self = .timedOut
        default: return nil
        }
    }

    /// The error a capture that did not stop `target` ends in (`state`: the thread's /proc state letter now).
    package func error(target: String, state: Character?, timeoutNanos: UInt64, context: [String: String])
        -> StallWatchError
    {
        var context = context
        if let state { context["threadState"] = String(state) }
        context["unstopped"] = rawValue
        let message: String
        switch self {
        case .uninterruptible:
            message =
                "\(target) is in uninterruptible sleep (state D) and cannot stop before its call ends: "
                + "released at once without a sample"
        case .workingInKernel:
            message =
                "\(target) ran without reaching the stop (working inside a system call, thread state "
                + ProcStat.describe(state: state) + "): released at once without a sample"
        case .timedOut:
            message =
                "\(target) did not stop within \(describeNanoseconds(timeoutNanos)); thread state "
                + ProcStat.describe(state: state) + "; released without a sample"
        }
        return StallWatchError(.captureTimedOut, message, context: context)
    }
}
