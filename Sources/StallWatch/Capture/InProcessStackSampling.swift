// InProcessStackSampling: the embedded watchdog's samples, by the non-interrupting helper or, failing that, signal.
import CStallWatchSignal

#if canImport(Glibc)
    import Glibc
#endif

/// Samples threads of this process without changing their behaviour.
///
/// A thread blocked in one of the few calls that even a ptrace stop cuts short (``BlockedThreadCapture``: socket
/// calls with timeouts, `epoll_wait`, `semtimedop`, …) is not touched at all: its frozen stack is copied. Every
/// other sample goes through ``ThreadCaptureHelper`` (a ptrace stop: no EINTR, no handler run on the thread, no
/// dependence on signal masks or dispositions) when ptrace is permitted; `capture.method` is then
/// `ptrace-helper`. Only where ptrace is refused does it fall back to the signal path (`capture.method`
/// `signal`), and then only for a thread that is running in user space (`/proc/self/task/TID/syscall` says
/// `running`), does not block the signal, and while the signal's disposition is still StallWatch's (checked
/// before every signal, one `sigaction` query). Any other thread is not signalled: its sample says why, so a
/// blocking call is never cut short and a signal that now belongs to the application (or to `SIG_DFL`) is
/// never sent.
///
/// A thread seen in a system call is still inside it, on its way out, while `syscall` already says `running`
/// (``CallExitGuard``): it is signalled only once it has run 1 ms on a CPU since (a signal would make `poll`,
/// `epoll_wait`, … return EINTR), and not stopped while it leaves a call that a stop cuts short (the restart would
/// start the call's timeout over): if it has not been on a CPU since, its stack is copied as it was in the call;
/// otherwise the sample is skipped and says why.
///
/// - Note: In the fallback, a thread may enter a system call in the microseconds between the check and the
///   signal; that call can then return EINTR. The helper path has no such window.
final class InProcessStackSampling: StackSampling, @unchecked Sendable {  // Used by one watching thread.
    private let helper: ThreadCaptureHelper?
    private let signal: SignalSampler?
    private let unwinder: StackUnwinder
    /// Why the helper is not used (nil when it is); repeated in every report's setup errors.
    let helperUnavailable: String?
    private var lastRefusal: String?
    /// Each thread's last system call, so that no capture cuts short a call the thread is still leaving.
    private var calls = CallExitGuard(processID: getpid())

    init(helper: ThreadCaptureHelper?, signal: SignalSampler?, unwinder: StackUnwinder, helperUnavailable: String?) {
        self.helper = helper
        self.signal = signal
        self.unwinder = unwinder
        self.helperUnavailable = helperUnavailable
    }

    /// The longest a snapshot thread's capture waits for it: 20 ms.
    static let snapshotTimeoutNanos: UInt64 = 20_000_000

    var captureMethod: CaptureMethod { helper != nil ? ThreadCaptureHelper.captureMethod : .signal }

    func sample(_ thread: SampledThread, configuration: StallWatchConfiguration) -> StackSample {
        capture(
            thread, maxFrames: configuration.maxFrames, timeoutNanos: configuration.intervals.captureTimeout,
            maxStackBytes: configuration.maxStackBytes, waitForRunnable: true)
    }

    /// A snapshot thread waits at most 20 ms for its stop, as on the signal path: a thread that cannot stop soon
    /// (in `vfork()` until its child execs, inside one long `write()`) must not hold up the stuck thread's
    /// samples, which go on between the snapshot's threads.
    func sampleThread(id: Int32, configuration: StallWatchConfiguration) -> StackSample {
        var sample = capture(
            SampledThread(threadID: id, stackLow: 0, stackHigh: 0), maxFrames: configuration.maxThreadFrames,
            timeoutNanos: min(configuration.intervals.captureTimeout, Self.snapshotTimeoutNanos),
            maxStackBytes: configuration.maxStackBytes, waitForRunnable: false)
        sample.failure = nil  // a snapshot thread's problem is its own error, not a capture failure
        return sample
    }

    /// - Parameter waitForRunnable: The stuck thread's samples wait longer for a runnable thread to stop
    ///   (``stopTimeout(_:_:)``); a snapshot's other threads do not.
    private func capture(
        _ thread: SampledThread, maxFrames: Int, timeoutNanos timeout: UInt64, maxStackBytes: Int,
        waitForRunnable: Bool
    ) -> StackSample {
        let result: Result<StackCapture, StallWatchError>
        let look = calls.look(thread.threadID)
        if case .inCall(let call, cutShortByStop: .some) = look {
            // Neither a signal nor a ptrace stop: either would make this call fail with EINTR.
            guard
                let capture = BlockedThreadCapture.capture(thread, call, maxStackBytes: maxStackBytes)
            else { return StackSample(error: "the thread left its system call during the stack copy; no sample") }
            result = .success(capture)
        } else if case .leaving(let call, cutShortByStop: true) = look {
            return calls.leavingSample(
                thread, call, unwinder: unwinder, maxFrames: maxFrames, maxStackBytes: maxStackBytes)
        } else if let helper {
            result = helper.capture(
                thread, maxStackBytes: maxStackBytes,
                timeoutNanos: waitForRunnable ? Self.stopTimeout(thread, timeout) : timeout)
        } else if let refusal = signalRefusal(thread, look) {
            // Listed in capture.errors once per new reason, not once per sample.
            defer { lastRefusal = refusal }
            return StackSample(error: refusal, failure: refusal == lastRefusal ? nil : refusal)
        } else if let signal {
            var target = thread
            if target.stackHigh == 0 {
                guard let located = ThreadStackLocator().thread(target.threadID, sampler: signal, timeoutNanos: timeout)
                else { return StackSample(error: "stack bounds not found") }
                target = located
            }
            result = signal.capture(target, timeoutNanos: timeout, maxStackBytes: maxStackBytes)
        } else {
            return StackSample(error: "no capture path available")
        }
        switch result {
        case .success(let capture):
            return StackSample(unwinding: capture, with: unwinder, maxFrames: maxFrames)
        case .failure(let error):
            // A thread in uninterruptible sleep was released at once: its stack is read as it sleeps; one that had
            // no CPU to reach the stop, as it was in the call it was seen in.
            return StackSample(failed: error).readingStackAsItSleeps(
                thread, processID: getpid(), unwinder: unwinder, maxFrames: maxFrames, maxStackBytes: maxStackBytes
            ).readingUnmovedStack(
                thread, calls: calls, unwinder: unwinder, maxFrames: maxFrames, maxStackBytes: maxStackBytes)
        }
    }

    /// How long a ptrace capture may wait for `thread` to stop. A runnable thread (state R) stops as soon as the
    /// scheduler runs it, and it makes no progress before that (a stall on the CPU cannot end while its thread
    /// waits for one), so on a loaded machine it gets up to ``runnableStopTimeoutNanos``: the sample still shows
    /// the stall. `captureTimeoutMs` bounds the others (a thread in uninterruptible sleep never stops soon).
    static func stopTimeout(_ thread: SampledThread, _ timeout: UInt64) -> UInt64 {
        guard ProcDirectory(processID: getpid(), threadID: thread.threadID).stat()?.state == "R" else { return timeout }
        return max(timeout, runnableStopTimeoutNanos)
    }

    /// A runnable thread's stop waits up to a second.
    static let runnableStopTimeoutNanos: UInt64 = 1_000_000_000

    /// Why `thread` must not be signalled now (as `look` found it), or nil if the signal path may be used.
    func signalRefusal(_ thread: SampledThread, _ look: CallExitGuard.Look) -> String? {
        guard let signal else { return "no sampling signal is installed" }
        switch Int(sw_capture_disposition()) {
        case Int(SW_DISPOSITION_OURS): break
        case Int(SW_DISPOSITION_DEFAULT):
            return "signal \(signal.signal) was reset to SIG_DFL by the application (it would kill the process): "
                + "not sent"
        case Int(SW_DISPOSITION_IGNORED):
            return "signal \(signal.signal) is ignored (SIG_IGN) by the application: not sent"
        default:
            return "signal \(signal.signal) now has the application's own handler: not sent"
        }
        if ThreadStackLocator.blocks(thread.threadID, signal: signal.signal) {
            return "the thread blocks the sampling signal, and ptrace is not available: not sampled"
        }
        switch look {
        case .inCall(let call, _):
            let name = call.number.map(SyscallTable.name) ?? "?"
            return "the thread is in system call \(name); a signal would interrupt it (EINTR) and ptrace is not "
                + "available: not sampled"
        case .leaving:
            return "the thread is leaving a system call; a signal would interrupt it (EINTR) and ptrace is not "
                + "available: not sampled"
        case .outside:
            return nil
        }
    }

    /// The system call thread `tid` is blocked in (its name or number), or nil when it runs in user space.
    static func systemCall(_ tid: Int32) -> String? {
        ProcDirectory.current.thread(tid).syscall()?.number.map(SyscallTable.name)
    }
}
