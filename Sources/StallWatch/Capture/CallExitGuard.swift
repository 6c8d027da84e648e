// CallExitGuard: keeps a capture from cutting short a system call the thread was last seen in and may still be leaving.

/// What the samplers of one process remember of each thread's last system call, so that no capture cuts short a
/// call the thread is still leaving, and a thread that has not run since it was seen in a call can be read as it
/// was there.
///
/// A thread woken from its call (its timeout expired, its data arrived) stays inside the call until it gets a CPU
/// to return to user space; meanwhile `/proc/…/syscall` already says `running`. A signal then makes the call fail
/// with EINTR, and so does a ptrace stop for the calls the kernel never restarts after a stop
/// (``BlockedThreadCapture/interruptedByStop(_:processID:)``): setting such a call to run again (the capture's
/// restart) would start its timeout over — a `recv` with a 600 ms `SO_RCVTIMEO`, stopped while it waits for a CPU
/// after its timeout, would last 1200 ms. So a thread a look found in a call is taken to be out of it only once it has
/// run ``leftCallCPUNanos`` on a CPU since (schedstat), far more than any return from a call takes; until then it is
/// "leaving" the call. A thread seen blocked in a call again is simply in that call.
///
/// A thread that has not been given a CPU at all since a look found it in a call (schedstat's count of timeslices
/// unchanged: it moves the moment the thread is switched in) has not run one instruction since: its user stack is
/// the one it had in the call, and ``unmovedCall(_:)`` returns that call so the stack can be copied as it is.
///
/// Not thread-safe: each sampler keeps its own, used by its one watching thread.
package struct CallExitGuard {
    /// What a look at a thread found.
    package enum Look: Equatable {
        /// Blocked in a system call; `cutShortByStop` names it when even a ptrace stop would make it fail.
        case inCall(ThreadWait, cutShortByStop: String?)
        /// Not blocked, but leaving the call a look found it in (and whether a stop would cut that call short): it
        /// has not run long enough since to be out of it.
        case leaving(ThreadWait, cutShortByStop: Bool)
        /// Running in user space, or out of any call it was seen in.
        case outside
    }

    /// How long a thread seen in a call must have run since before it is taken to be out of it: 1 ms.
    static let leftCallCPUNanos: UInt64 = 1_000_000
    /// Threads remembered at most; beyond it the memory is dropped (threads come and go).
    static let maxThreads = 4096

    package let processID: Int32
    private var lastCall: [Int32: (call: ThreadWait, cutShortByStop: Bool, schedule: ThreadSchedule?)] = [:]

    package init(processID: Int32) { self.processID = processID }

    private func schedule(_ threadID: Int32) -> ThreadSchedule? {
        ProcDirectory(processID: processID, threadID: threadID).schedstat(now: 0)
    }

    /// Looks at thread `threadID` now: its schedule first, then its call, so that an unchanged schedule later
    /// proves it has not run since it was seen in the call.
    package mutating func look(_ threadID: Int32) -> Look {
        let now = schedule(threadID)
        if let call = BlockedThreadCapture.blocked(threadID, processID: processID) {
            let cutShort = BlockedThreadCapture.interruptedByStop(call, processID: processID)
            if lastCall.count >= Self.maxThreads { lastCall.removeAll() }
            lastCall[threadID] = (call, cutShort != nil, now)
            return .inCall(call, cutShortByStop: cutShort)
        }
        guard let seen = lastCall[threadID] else { return .outside }
        let before = seen.schedule?.cpuNanos ?? 0
        guard let cpuNanos = now?.cpuNanos, cpuNanos >= before, cpuNanos - before >= Self.leftCallCPUNanos else {
            return .leaving(seen.call, cutShortByStop: seen.cutShortByStop)
        }
        lastCall[threadID] = nil
        return .outside
    }

    /// The call the last look found thread `threadID` in, if the thread has not been given a CPU since: it is
    /// still in that call (woken from it perhaps, waiting for a CPU), its user stack as it was there.
    package func unmovedCall(_ threadID: Int32) -> ThreadWait? {
        guard let seen = lastCall[threadID], let then = seen.schedule, let slices = then.timeslices,
            let now = schedule(threadID), now.timeslices == slices, now.cpuNanos == then.cpuNanos
        else { return nil }
        return seen.call
    }

    /// The stack of thread `thread`, copied without touching it, if it has not been on a CPU since the last look
    /// found it in a call (checked again after the copy); nil otherwise.
    package func unmovedCapture(_ thread: SampledThread, maxStackBytes: Int) -> StackCapture? {
        guard let call = unmovedCall(thread.threadID) else { return nil }
        return BlockedThreadCapture.capture(
            thread, call, maxStackBytes: maxStackBytes, processID: processID,
            stillThere: { unmovedCall(thread.threadID) == call })
    }

    /// A skipped sample's reason: the thread is leaving `call`, which a stop would make fail.
    package static func leavingMessage(_ call: ThreadWait) -> String {
        "the thread is leaving system call \(call.number.map(SyscallTable.name) ?? "?"), which a stop would make fail "
            + "(EINTR): not sampled"
    }

    /// The sample of a thread leaving `call` (never stopped): its stack as it was in the call when it has not been on
    /// a CPU since, else none, saying why; either way the call it is still in.
    package func leavingSample(
        _ thread: SampledThread, _ call: ThreadWait, unwinder: StackUnwinder?, maxFrames: Int, maxStackBytes: Int
    ) -> StackSample {
        var sample = StackSample(error: Self.leavingMessage(call))
        if let unwinder, let frozen = unmovedCapture(thread, maxStackBytes: maxStackBytes) {
            sample = StackSample(unwinding: frozen, with: unwinder, maxFrames: maxFrames)
        }
        sample.leavingCall = call
        return sample
    }
}
