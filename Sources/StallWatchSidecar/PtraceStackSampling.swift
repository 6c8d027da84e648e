// PtraceStackSampling: a StallRecorder's samples of another process, by ptrace stop, stack copy and unwind.
import StallWatch

/// Samples a thread of another process: ``PtraceSampler`` stops it briefly (`PTRACE_SEIZE` + `PTRACE_INTERRUPT`,
/// never SIGSTOP), copies registers and stack and detaches at once; ``StackUnwinder`` unwinds the copy while the
/// target runs again. Failures (the target exited mid-capture, permission, a thread that would not stop) become
/// the sample's error.
///
/// A thread blocked in a call that even a ptrace stop cuts short (`epoll_wait`, a socket call with a timeout,
/// `semtimedop`, …: the restart after the stop would start its timeout over, and a loop's timers would fire late)
/// is not stopped: its stack is copied as it sits in the call. Nor is one still leaving such a call
/// (``CallExitGuard``): if it has not been on a CPU since, its stack is copied as it was in the call; otherwise the
/// sample is skipped and says why.
package final class PtraceStackSampling: StackSampling, @unchecked Sendable {  // Used by one watching thread.
    package let captureMethod = CaptureMethod.ptrace
    package let processID: Int32
    private let sampler: PtraceSampler
    private let unwinder: StackUnwinder?
    /// Called after every capture attempt (tests check the target's state here).
    var afterCapture: (@Sendable (Int32) -> Void)?
    private(set) var setupError: String?
    /// The target's maps, shared by the captures of a snapshot and of the samples that follow it.
    private var maps: PtraceMaps?
    /// Each thread's last system call, so that no stop cuts short a call the thread is still leaving.
    private var calls: CallExitGuard
    /// Maps older than this are read again before the next capture (a thread's stack does not move, but
    /// threads come and go).
    static let mapsLifetimeNanos: UInt64 = 2_000_000_000

    /// - Parameter captureTimeoutNanos: How long a capture waits for a thread to stop.
    package init(processID: Int32, captureTimeoutNanos: UInt64) {
        self.processID = processID
        sampler = PtraceSampler(processID: processID, timeoutNanos: captureTimeoutNanos)
        calls = CallExitGuard(processID: processID)
        do {
            unwinder = try StackUnwinder(processID: processID)
        } catch {
            unwinder = nil
            setupError = "unwinder unavailable: \(error.message)"
        }
    }

    package func beginThreadSnapshot() { maps = PtraceMaps(processID: processID) }

    package func sample(_ thread: SampledThread, configuration: StallWatchConfiguration) -> StackSample {
        switch calls.look(thread.threadID) {
        case .inCall(let call, cutShortByStop: .some):
            let frozen = BlockedThreadCapture.capture(
                thread, call, maxStackBytes: configuration.maxStackBytes, processID: processID)
            guard let frozen, let unwinder else {
                return StackSample(error: setupError ?? "the thread left its system call during the stack copy")
            }
            return StackSample(unwinding: frozen, with: unwinder, maxFrames: configuration.maxFrames)
        case .leaving(let call, cutShortByStop: true):
            return calls.leavingSample(
                thread, call, unwinder: unwinder, maxFrames: configuration.maxFrames,
                maxStackBytes: configuration.maxStackBytes)
        default:
            break
        }
        // Read before stopping anyone: it is the slowest step and must not lengthen the pause.
        if maps?.isOlder(thanNanos: Self.mapsLifetimeNanos) ?? true { maps = PtraceMaps(processID: processID) }
        let result = sampler.capture(
            threadID: thread.threadID, maxStackBytes: configuration.maxStackBytes, maps: maps)
        afterCapture?(thread.threadID)
        switch result {
        case .success(let capture):
            guard let unwinder else {
                return StackSample(pauseNanos: capture.pauseNanoseconds, error: setupError ?? "no unwinder")
            }
            return StackSample(unwinding: capture, with: unwinder, maxFrames: configuration.maxFrames)
        case .failure(let error):
            let message =
                error.code == .noSuchProcess ? "the target exited during the capture (\(error.message))" : error.message
            let failed = StackSample(failed: error, message: message)
            guard let unwinder else { return failed }
            // In uninterruptible sleep the thread was left alone; its user stack is read as it sleeps. One that had no
            // CPU to reach the stop is read as it was in the call it was seen in.
            return failed.readingStackAsItSleeps(
                thread, processID: processID, unwinder: unwinder, maxFrames: configuration.maxFrames,
                maxStackBytes: configuration.maxStackBytes
            ).readingUnmovedStack(
                thread, calls: calls, unwinder: unwinder, maxFrames: configuration.maxFrames,
                maxStackBytes: configuration.maxStackBytes)
        }
    }
}
