// StackSampling: how a StallRecorder gets one stack sample of the stuck thread (signal in-process, ptrace outside).
import CStallWatchCore

#if canImport(Glibc)
    import Glibc
#endif

/// One sample's outcome: the frames (innermost first, see ``UnwoundStack``) and what it cost the target.
package struct StackSample: Sendable {
    package var frames: [UnwoundFrame] = []
    /// How long the sampled thread was held (signal handler or ptrace stop), nanoseconds.
    package var pauseNanos: UInt64?
    /// Unwinding the copied stack, nanoseconds.
    var unwindNanos: UInt64?
    /// Why this sample has no (or too few) frames; lands in the report's sample.
    package var error: String?
    /// A capture failure worth listing in the report's `capture.errors`.
    package var failure: String?
    /// Why the thread was not stopped (it exists, but could not reach the stop); nil when it was, or when the
    /// capture failed otherwise.
    package var unstopped: UnstoppedThread?
    /// The thread was not stopped: it was inside the kernel (a thread in user space stops at once) or waiting for
    /// a CPU, and `pauseNanos` is not what the target saw.
    package var timedOut: Bool { unstopped != nil }
    /// The system call whose boundary the thread stopped at (``StackCapture/stopSyscall``).
    package var stopSyscall: Int?
    /// That call as `/proc/…/syscall` shows one — its arguments, stack pointer and program counter, from the
    /// registers at the stop — so that it can be matched against a loop's learned idle wait.
    package var stopWait: ThreadWait?
    /// How long the thread took to stop for the capture (ptrace), nanoseconds; part of `pauseNanos`.
    var stopWaitNanos: UInt64?
    /// When the captured state was the thread's (``StackCapture/capturedAtNanoseconds``); nil when unknown.
    var capturedAtNanos: UInt64?
    /// The call a skipped sample's thread was still leaving (``CallExitGuard``): woken from it, not yet out of it.
    package var leavingCall: ThreadWait?

    package init(
        frames: [UnwoundFrame] = [], pauseNanos: UInt64? = nil, unwindNanos: UInt64? = nil, error: String? = nil,
        failure: String? = nil
    ) {
        self.frames = frames
        self.pauseNanos = pauseNanos
        self.unwindNanos = unwindNanos
        self.error = error
        self.failure = failure
    }

    /// The frames' addresses.
    package var addresses: [UInt64] { frames.map(\.address) }
}

/// Why a capture could not stop a thread that exists. A thread that cannot stop soon is never held: it is left
/// alone, or released at once, and only what /proc shows without a stop is read.
package enum UnstoppedThread: String, Sendable, Equatable {
    /// In uninterruptible sleep (state D: an fsync waiting for writeback, a read from a disk): only the end of its
    /// call wakes it.
    case uninterruptible
    /// It ran on a CPU without reaching the stop: it was working inside a system call (a large write copied into
    /// the page cache), where a stop is reached only when the call returns.
    case workingInKernel
    /// It did not stop within the capture timeout: it may have been waiting for a CPU, or inside the kernel.
    case timedOut
}

/// Takes a stack sample of one thread of the watched process. Called on the recorder's thread only.
package protocol StackSampling: AnyObject, Sendable {
    /// The report's `capture.method`.
    var captureMethod: CaptureMethod { get }
    /// Captures and unwinds `thread`'s stack now; problems are recorded in the result, never thrown.
    func sample(_ thread: SampledThread, configuration: StallWatchConfiguration) -> StackSample

    /// A stack of another thread of the target, for the all-threads snapshot of a stall's first sample (at most
    /// `configuration.maxThreadFrames` frames). The thread never registered itself, so the sampler finds what
    /// it needs (stack bounds) on its own, and gives up quickly.
    func sampleThread(id: Int32, configuration: StallWatchConfiguration) -> StackSample

    /// An all-threads snapshot is about to call ``sampleThread(id:configuration:)`` for many threads: read what
    /// they share (the process's maps) once, now.
    func beginThreadSnapshot()
}

extension StackSampling {
    /// By default, nothing is shared between the threads of a snapshot.
    package func beginThreadSnapshot() {}

    /// By default, the thread is sampled like the loop thread with unknown stack bounds.
    package func sampleThread(id: Int32, configuration: StallWatchConfiguration) -> StackSample {
        var limited = configuration
        limited.maxFrames = configuration.maxThreadFrames
        return sample(SampledThread(threadID: id, stackLow: 0, stackHigh: 0), configuration: limited)
    }
}

/// In-process sampling: a real-time signal to the loop thread copies its stack; the copy is unwound here.
final class SignalStackSampling: StackSampling, @unchecked Sendable {  // Used by one watchdog thread.
    let captureMethod = CaptureMethod.signal
    private let sampler: SignalSampler
    private let unwinder: StackUnwinder
    /// This process's stack mappings, read once per all-threads snapshot.
    private var locator: ThreadStackLocator?

    init(sampler: SignalSampler, unwinder: StackUnwinder) {
        self.sampler = sampler
        self.unwinder = unwinder
    }

    func sample(_ thread: SampledThread, configuration: StallWatchConfiguration) -> StackSample {
        let timeout = configuration.intervals.captureTimeout
        switch sampler.capture(thread, timeoutNanos: timeout, maxStackBytes: configuration.maxStackBytes) {
        case .success(let capture):
            let stack = unwinder.unwind(capture, maxFrames: configuration.maxFrames)
            var result = StackSample(
                frames: stack.frames, pauseNanos: capture.pauseNanoseconds, unwindNanos: stack.unwindNanoseconds)
            if let error = stack.error, stack.frames.count < 2 { result.error = error }
            result.capturedAtNanos = capture.capturedAtNanoseconds == 0 ? nil : capture.capturedAtNanoseconds
            return result
        case .failure(let error):
            var result = StackSample(error: error.message, failure: error.message)
            result.unstopped = error.code == .captureTimedOut ? .timedOut : nil
            return result
        }
    }

    func beginThreadSnapshot() { locator = ThreadStackLocator() }

    /// Signals only a thread that runs in user space, where the signal is invisible: skips a thread that blocks
    /// the sampling signal (it could never answer: libdispatch workers block them all) and one blocked in a
    /// system call (the signal would make the call fail with EINTR), finds the stack bounds of the others
    /// (``ThreadStackLocator``) and waits at most 20 ms.
    func sampleThread(id: Int32, configuration: StallWatchConfiguration) -> StackSample {
        if ThreadStackLocator.blocks(id, signal: sampler.signal) {
            return StackSample(error: "the thread blocks the sampling signal; its stack was not captured")
        }
        if let call = InProcessStackSampling.systemCall(id) {
            return StackSample(
                error: "the thread is in system call \(call); a signal would interrupt it (EINTR): not sampled")
        }
        let timeout = min(configuration.intervals.captureTimeout, InProcessStackSampling.snapshotTimeoutNanos)
        guard let target = (locator ?? ThreadStackLocator()).thread(id, sampler: sampler, timeoutNanos: timeout) else {
            return StackSample(error: "stack bounds not found")
        }
        switch sampler.capture(target, timeoutNanos: timeout, maxStackBytes: configuration.maxStackBytes) {
        case .success(let capture):
            let stack = unwinder.unwind(capture, maxFrames: configuration.maxThreadFrames)
            return StackSample(frames: stack.frames, pauseNanos: capture.pauseNanoseconds)
        case .failure(let error):
            return StackSample(error: error.message)
        }
    }
}

extension StackSample {
    /// The sample of one capture, unwound: its addresses, the target's pause and the unwind's cost; an unwind
    /// that stopped before two frames is the sample's error, and the capture's notes are its failure.
    package init(unwinding capture: StackCapture, with unwinder: StackUnwinder, maxFrames: Int) {
        var stack = unwinder.unwind(capture, maxFrames: maxFrames)
        // A frame pointer recovered from the copy may be a stale record: the one that unwinds furthest is kept.
        for framePointer in capture.otherFramePointers where stack.frames.count < maxFrames {
            var other = capture
            other.registers[Int(SW_REG_RBP)] = framePointer
            let alternative = unwinder.unwind(other, maxFrames: maxFrames)
            if alternative.frames.count > stack.frames.count { stack = alternative }
        }
        self.init(frames: stack.frames, pauseNanos: capture.pauseNanoseconds, unwindNanos: stack.unwindNanoseconds)
        if let error = stack.error, stack.frames.count < 2 { self.error = error }
        let notes = capture.notes + stack.notes
        if !notes.isEmpty { failure = notes.joined(separator: "; ") }
        stopWaitNanos = capture.stopWaitNanoseconds
        stopSyscall = capture.stopSyscall
        stopWait = capture.stopWait
        capturedAtNanos = capture.capturedAtNanoseconds == 0 ? nil : capture.capturedAtNanoseconds
    }

    /// A ptrace capture that could not stop `thread` — released at once because it sleeps uninterruptibly (state
    /// D), or not stopped within the timeout while it sleeps in a call (a sleep or a lock wait on a machine whose
    /// CPUs are busy: the stop needs a CPU to be reached) — is followed by a read of its user stack as it sleeps:
    /// the stack cannot change while the thread sits in its call, so it is copied from memory where
    /// `/proc/…/syscall` places it. Returns self unchanged for any other failure, or when the thread is not (or no
    /// longer) asleep in a call: a thread that runs is never read without a stop.
    package func readingStackAsItSleeps(
        _ thread: SampledThread, processID: Int32, unwinder: StackUnwinder, maxFrames: Int, maxStackBytes: Int
    ) -> StackSample {
        guard let unstopped, unstopped != .workingInKernel,
            let call = Self.sleepingCall(
                thread.threadID, processID: processID, retries: unstopped == .uninterruptible ? 80 : 1),
            let frozen = BlockedThreadCapture.capture(
                thread, call, maxStackBytes: maxStackBytes, processID: processID)
        else { return self }
        return taken(from: frozen, unwinder: unwinder, maxFrames: maxFrames, note: "its stack was read as it sleeps")
    }

    /// A capture that did not stop `thread` in time (``UnstoppedThread/timedOut``), of a thread not given a CPU since
    /// the sampler's look found it in a call (``CallExitGuard/unmovedCapture(_:maxStackBytes:)``: woken by the
    /// interrupt, it waited for a CPU all along), followed by a copy of its stack as it was in that call. Returns self
    /// for any other failure, a sample that has a stack already, or when the thread has run since.
    package func readingUnmovedStack(
        _ thread: SampledThread, calls: CallExitGuard, unwinder: StackUnwinder, maxFrames: Int, maxStackBytes: Int
    ) -> StackSample {
        guard unstopped == .timedOut, frames.isEmpty,
            let frozen = calls.unmovedCapture(thread, maxStackBytes: maxStackBytes)
        else { return self }
        return taken(
            from: frozen, unwinder: unwinder, maxFrames: maxFrames,
            note: "it had not been on a CPU since it was seen in its call: its stack was read as it was there")
    }

    /// This failed sample's stack taken from `frozen`, a copy made without a stop: no pause, the same reason it did
    /// not stop, and `note` added to its failure.
    private func taken(from frozen: StackCapture, unwinder: StackUnwinder, maxFrames: Int, note: String) -> StackSample
    {
        var sample = StackSample(unwinding: frozen, with: unwinder, maxFrames: maxFrames)
        sample.pauseNanos = nil
        sample.unstopped = unstopped
        sample.failure = failure.map { $0 + "; " + note }
        return sample
    }

    /// The call a thread asleep in a system call sits in, read from `/proc/…/syscall`. For a thread in
    /// uninterruptible sleep that file says only "running" while the thread runs inside its call (writing pages
    /// back between its sleeps), so it is read again, `retries` times in all over about 20 ms for 80, until it
    /// shows the thread asleep in the call.
    static func sleepingCall(_ threadID: Int32, processID: Int32, retries: Int = 80) -> ThreadWait? {
        for attempt in 0..<max(1, retries) {
            if let call = BlockedThreadCapture.blocked(threadID, processID: processID) { return call }
            if attempt < retries - 1 { usleep(250) }
        }
        return nil
    }

    /// The sample of a capture that failed with `error`: its message, and why the thread was not stopped.
    package init(failed error: StallWatchError, message: String? = nil) {
        self.init(error: message ?? error.message, failure: message ?? error.message)
        if error.code == .captureTimedOut {
            unstopped = error.context["unstopped"].flatMap(UnstoppedThread.init(rawValue:)) ?? .timedOut
        }
    }
}
