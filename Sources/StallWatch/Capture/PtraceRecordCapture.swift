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
        capture.capturedAtNanoseconds = record.stopped_at_ns
        return .success(capture)
    }
}
