// ProcProgressProbe: zero-instrumentation progress evidence for a thread nobody instrumented, from /proc.
import Dispatch
import StallWatch

#if canImport(Glibc)
    import Glibc
#endif

/// Turns what the kernel says about one thread into the ``LoopSnapshot`` a ``StallDetector`` expects, so a loop
/// that publishes nothing is judged by the same state machine.
///
/// Evidence of progress, read from `/proc/<pid>/task/<tid>/`:
/// - the thread sits in an idle-wait system call (`epoll_wait`, `poll`, `ppoll`, `select`, `io_uring_enter` …:
///   ``SyscallTable/Kind/idleWait``) — reported as the idle phase `beforeWaiting`;
/// - it left such a call, or its voluntary context switches (`status`) or read/write system-call counters (`io`:
///   `syscr`, `syscw`) moved since the last look — a new busy "phase" starts now.
///
/// With none of these for the threshold, the detector reports a stall. The phase start is the poll that saw
/// the last evidence, so a stall's duration is under-estimated by at most one poll interval: a sidecar errs
/// toward silence. A stopped or traced thread (state T/t) is treated as not running: nothing to blame.
///
/// Blind spot: a loop stuck in a busy sequence of read/write calls (synchronous disk I/O in a loop) looks like
/// progress here; the heartbeat sees it.
public struct ProcProgressProbe: Sendable {
    public let processID: Int32
    public let threadID: Int32
    /// How the follower waits between looks.
    package var polling = PollingWait(intervalNanos: 50_000_000, wakeup: DispatchSemaphore(value: 0))
    private var sequence: UInt64 = 1
    private var phaseStart: UInt64
    private var idle = false
    private var counters: [UInt64]?
    /// Voluntary switches our own ptrace captures may have caused (the stop, and going back to sleep after it),
    /// for this look and the one before.
    private var captureSwitches: (now: UInt64, previous: UInt64) = (0, 0)

    public init(processID: Int32, threadID: Int32, now: UInt64) {
        self.processID = processID
        self.threadID = threadID
        phaseStart = now
    }

    /// A probe whose follower waits with `polling`.
    package init(processID: Int32, threadID: Int32, now: UInt64, polling: PollingWait) {
        self.init(processID: processID, threadID: threadID, now: now)
        self.polling = polling
    }

    /// What the thread looks like now; nil when it is gone.
    public mutating func observe(now: UInt64) -> LoopSnapshot? {
        let dir = "/proc/\(processID)/task/\(threadID)"
        guard let status = ProcFile.text("\(dir)/status") else { return nil }
        let state = ProcFile.statusField(status, "State")?.first ?? "?"
        if state == "Z" || state == "X" { return nil }
        if state == "T" || state == "t" {
            counters = nil
            return LoopSnapshot(sequence: sequence, activity: [], phaseStartNanos: phaseStart)
        }
        if inIdleWait(dir) {
            if !idle {
                sequence += 1
                idle = true
            }
            counters = nil
            return LoopSnapshot(sequence: sequence, activity: .beforeWaiting, phaseStartNanos: phaseStart)
        }
        let current = readCounters(dir, status: status)
        let allowance = captureSwitches.now + captureSwitches.previous
        captureSwitches = (0, captureSwitches.now)
        if idle || counters == nil || !Self.onlyOurSwitches(from: counters!, to: current, allowance: allowance) {
            // Left the idle wait, first look, or the thread switched or made I/O calls: progress.
            sequence += 1
            phaseStart = now
            idle = false
        }
        counters = current
        return LoopSnapshot(sequence: sequence, activity: .afterWaiting, phaseStartNanos: phaseStart)
    }

    /// Call after each ptrace capture of the thread: its stop, and its going back to sleep after the detach,
    /// are voluntary context switches that must not read as progress.
    public mutating func noteCapture() {
        captureSwitches.now += 2
    }

    /// No counter moved except voluntary switches within what our captures explain.
    static func onlyOurSwitches(from old: [UInt64], to new: [UInt64], allowance: UInt64) -> Bool {
        guard old.count == new.count, let oldSwitches = old.first, let newSwitches = new.first,
            newSwitches >= oldSwitches, newSwitches - oldSwitches <= allowance
        else { return false }
        return old.dropFirst() == new.dropFirst()
    }

    private func inIdleWait(_ dir: String) -> Bool {
        if let line = ProcFile.text("\(dir)/syscall"), let first = line.split(separator: " ").first {
            guard let number = Int(first), number >= 0 else { return false }  // "running" or -1: user space
            return SyscallTable.kind(number) == .idleWait
        }
        // syscall needs ptrace-attach rights; wchan only read rights.
        guard let wchan = ProcFile.text("\(dir)/wchan") else { return false }
        return ["do_epoll_wait", "ep_poll", "do_sys_poll", "do_select", "core_sys_select", "io_cqring_wait"]
            .contains(where: { wchan.hasPrefix($0) })
    }

    private func readCounters(_ dir: String, status: String) -> [UInt64] {
        var values = [UInt64(ProcFile.statusField(status, "voluntary_ctxt_switches") ?? "") ?? 0]
        if let io = ProcFile.text("\(dir)/io") {
            values.append(UInt64(ProcFile.statusField(io, "syscr") ?? "") ?? 0)
            values.append(UInt64(ProcFile.statusField(io, "syscw") ?? "") ?? 0)
        }
        return values
    }
}

extension ProcProgressProbe: ProgressSource {
    package var sampledThread: SampledThread? { SampledThread(threadID: threadID, stackLow: 0, stackHigh: 0) }

    package mutating func read(now: UInt64) -> ProgressReading {
        guard let snapshot = observe(now: now) else { return .ended(reason: "the watched thread \(threadID) exited") }
        return .progress(snapshot)
    }

    package func wait(for wait: StallDetector.Wait, nextSampleAt: UInt64?) -> Bool {
        polling.wait(for: wait, nextSampleAt: nextSampleAt)
    }
}
