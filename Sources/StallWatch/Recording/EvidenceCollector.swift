// EvidenceCollector: samples, probes and the all-thread snapshot of the stall being followed, into StallEvidence.
import CStallWatchCore

#if canImport(Glibc)
    import Glibc
#endif

/// Collects the evidence of one stall at a time, on the watching thread: a sample of the stuck thread at
/// detection and then every interval (at most `maxSamples`), its /proc state with each sample, every other
/// thread's state and stack at the first sample, and the process's CPU context over the stall.
///
/// Capture problems (a handler that did not run, a stack that would not unwind) are recorded in the evidence,
/// never thrown: a partial report beats no report.
struct EvidenceCollector {
    let configuration: StallWatchConfiguration
    /// What is watched and how it is sampled.
    let target: StallRecorder.Target
    var pid: Int32 { target.processID }

    /// The stall being followed; nil between stalls.
    private(set) var evidence: StallEvidence?
    private var thread: SampledThread?
    private var contextProbe: SystemContextProbe?
    /// The threads the stall's snapshot lists (nil until its wait graph is read), and those found later.
    private var listedThreads: Set<Int32>?
    private var lateThreads: [StallEvidence.Thread] = []
    private var snapshotDone = false
    /// Processes whose thread behind the wait this stall tried to capture (once each).
    var peersTried: Set<Int32> = []
    /// When the next sample is due (CLOCK_MONOTONIC), nil when none is.
    private(set) var nextSampleAt: UInt64?

    init(configuration: StallWatchConfiguration, target: StallRecorder.Target) {
        self.configuration = configuration
        self.target = target
    }

    /// A stall began on `thread` (detected at `now`): the first sample, the thread's state, every thread's
    /// state and the context at detection. `isOngoing` tells whether the stall still lasts (asked during the
    /// snapshot, which can take seconds with thousands of threads on a loaded machine); `afterFirstSample` runs
    /// between the first sample and the snapshot, while the stall is surely under way.
    mutating func begin(
        _ stall: StallDetector.Stall, thread: SampledThread?, annotations: [String: String],
        schedule: ThreadSchedule? = nil, reportID: String, now: UInt64, isOngoing: () -> Bool = { true },
        afterFirstSample: ([UnwoundFrame]) -> Void = { _ in }
    ) {
        self.thread = thread
        (listedThreads, lateThreads, snapshotDone, peersTried) = (nil, [], false, [])
        var evidence = StallEvidence(
            stall: stall, threadID: thread?.threadID, reportID: reportID, wallAtBegin: sw_realtime_ns(),
            monoAtBegin: now, intervalNanos: configuration.intervals.sampleInterval)
        evidence.annotations = annotations
        evidence.stallStartSchedule = schedule
        evidence.setupErrors = target.setupErrors
        self.evidence = evidence
        // The stack first, while the stall is surely under way (a short stall may end within milliseconds of
        // its detection on a loaded machine); the /proc context after. The sample's own probe, read just
        // before its capture, is the thread's state at detection.
        takeSample(now: now)
        afterFirstSample(self.evidence?.samples.first?.frames ?? [])
        if let tid = thread?.threadID {
            let first = self.evidence?.samples.first?.probe ?? ThreadProbe.read(pid: pid, tid: tid)
            self.evidence?.firstProbe = first
            contextProbe = SystemContextProbe(pid: pid, loopThreadID: tid, monotonicNanos: now)
            if let tracer = ProcDirectory(processID: pid).status()?.tracerProcessID, tracer != 0 {
                self.evidence?.notes.append(
                    "a tracer (debugger) is attached to the process (TracerPid \(tracer)): pauses may be its doing")
            }
        }
        let threads = snapshotThreads(isOngoing: isOngoing)
        self.evidence?.threads = threads
        snapshotDone = true
        mergeLateThreads()
    }

    /// The Concurrency sections of the followed stall's report.
    mutating func attach(task: StallReport.TaskDescription?, pool: StallReport.PoolDescription?) {
        evidence?.task = task
        evidence?.pool = pool
    }

    /// The loop's lead-up, copied at detection.
    mutating func attach(leadUp: LeadUpCapture) {
        evidence?.leadUp = leadUp
    }

    /// Stretches the sampling interval by `scale` from `now` on, with a note saying why.
    mutating func slowDown(by scale: UInt64, now: UInt64) {
        guard scale > 1, var evidence else { return }
        evidence.intervalNanos *= scale
        nextSampleAt = now &+ evidence.intervalNanos
        evidence.notes.append(
            "sampled every \(evidence.intervalNanos / 1_000_000) ms: this stall signature was seen recently")
        self.evidence = evidence
    }

    mutating func escalate(_ stall: StallDetector.Stall) { evidence?.stall = stall }

    mutating func addNote(_ note: String) { evidence?.notes.append(note) }

    mutating func noteLateWakeup(_ delayNanos: UInt64) { evidence?.lateWakeupNanos += delayNanos }

    /// Whether the stall being followed has a thread to sample.
    var hasThread: Bool { thread != nil }

    /// The stall being followed had no thread to sample (nobody held the loop: a queue waiting for a pool thread),
    /// and `threadID` took the loop up and ended it. Its state at the final report, against `scheduleAtStart` (its
    /// schedule at the stall's start, when read then), gives its CPU and run-queue figures over the stall; the
    /// report names it as the loop's thread. It held nothing during the stall: the figures may show the machine
    /// starving it, never a cause of its own (``StallEvidence/tookUpAtEnd``).
    mutating func adoptThreadThatTookUp(_ threadID: Int32, scheduleAtStart: ThreadSchedule?) {
        guard thread == nil, evidence != nil else { return }
        thread = SampledThread(threadID: threadID, stackLow: 0, stackHigh: 0)
        evidence?.threadID = threadID
        evidence?.tookUpAtEnd = true
        evidence?.stallStartSchedule = scheduleAtStart
        evidence?.notes.append(
            "thread \(threadID) took the loop up and ended the stall"
                + (scheduleAtStart == nil ? "" : "; its figures run from the stall's start"))
    }

    /// Reads the context's end state (for the final report).
    mutating func closeContext(now: UInt64) {
        evidence?.context = contextProbe?.finish(monotonicNanos: now)
        if let tid = thread?.threadID {
            var probe = ThreadProbe.read(pid: pid, tid: tid)
            let at = sw_monotonic_ns()
            readWaitUnderWay(
                &probe, since: evidence?.samples.last?.probe?.cpuNanos ?? evidence?.stallStartSchedule?.cpuNanos)
            if let probe { evidence?.lastProbe = (probe, at) }
        }
    }

    /// The wait for a CPU under way at a reading of a runnable thread whose CPU time has not moved since the
    /// reading before (`cpuBefore`): one that is not running. A thread that ran since is left alone — the read
    /// moves the watcher onto the thread's CPU, which a running thread would then share.
    private func readWaitUnderWay(_ probe: inout ThreadProbe?, since cpuBefore: UInt64?) {
        guard probe?.state == "R", let cpuBefore, probe?.cpuNanos == cpuBefore else { return }
        probe?.readWaitUnderWay(pid: pid)
    }

    /// The stall ended at `endNanos` (CLOCK_MONOTONIC): samples captured at or after it show the thread after the
    /// stall — back in its idle wait, or at its next piece of work — and are left out, with a note. The watching
    /// thread looks, then samples; the stall can end in between, and a loaded machine makes that window long.
    /// Exact when the end is the thread's own record (the loop's or the pool worker's): a thread stopped for a
    /// capture runs none of its code until the detach, so a capture seen before the end is of the stall. An end
    /// seen by a later look keeps every sample taken before that look.
    mutating func dropSamples(capturedFrom endNanos: UInt64) {
        guard var evidence else { return }
        let before = evidence.samples.count
        let afterEnd = evidence.samples.filter { ($0.capturedAtNanos ?? 0) >= endNanos }
        evidence.samples.removeAll { ($0.capturedAtNanos ?? 0) >= endNanos }
        let dropped = before - evidence.samples.count
        guard dropped > 0 else { return }
        if evidence.probeBeforeEnd == nil, let first = afterEnd.first, let at = first.probedAtNanos, at < endNanos {
            evidence.probeBeforeEnd = first.probe
        }
        evidence.notes.append(
            "\(dropped) of \(before) samples were captured after the stall ended and are left out")
        evidence.samplesAfterEnd += dropped
        self.evidence = evidence
    }

    /// The stuck thread's stack in the snapshot is its first sample's. When that sample has none (the thread was
    /// inside the kernel, working in a long `write()` or between the sleeps of an `fsync()`, and could neither
    /// stop nor be read as it slept), the first later sample of the stall that has one stands in, with a note:
    /// a stall's report always shows where its thread was when some sample could see it.
    mutating func fillStuckThreadStack() {
        guard var evidence, let tid = thread?.threadID,
            let index = evidence.threads.firstIndex(where: { $0.snapshot.threadId == tid }),
            evidence.threads[index].frames.isEmpty,
            let (position, sample) = evidence.samples.enumerated().first(where: { !$0.element.frames.isEmpty })
        else { return }
        let reason = evidence.threads[index].snapshot.error.map { " (\($0))" } ?? ""
        evidence.threads[index].frames = sample.frames
        evidence.threads[index].snapshot.error = nil
        evidence.notes.append(
            "the stuck thread's first sample has no stack\(reason): its stack in the thread list is that of sample "
                + "\(position), taken \(sample.offsetNanos / 1_000_000) ms into the stall")
        self.evidence = evidence
    }

    mutating func reset() {
        listedThreads = nil
        lateThreads = []
        snapshotDone = false
        evidence = nil
        thread = nil
        contextProbe = nil
        nextSampleAt = nil
    }

    /// x86_64 `restart_syscall`, what /proc shows for a call the kernel resumes after a ptrace stop.
    static let restartSyscall = 219

    /// Takes one sample of the stuck thread; returns it (nil when no stall is followed).
    @discardableResult
    mutating func takeSample(now: UInt64) -> StallEvidence.Sample? {
        guard var evidence else { return nil }
        defer { self.evidence = evidence }
        nextSampleAt = evidence.samples.count + 1 < configuration.maxSamples ? now &+ evidence.intervalNanos : nil
        var sample = StallEvidence.Sample(offsetNanos: now &- evidence.stall.startNanos, frames: [])
        contextProbe?.noteProcessIO()
        guard let thread else {
            sample.error = "the loop thread is unknown"
            evidence.samples.append(sample)
            return sample
        }
        // The wait target is read before the capture: a stop turns a timed futex wait or sleep into
        // restart_syscall. A restart at the place of the previous sample's call continues that call.
        sample.probe = ThreadProbe.read(pid: pid, tid: thread.threadID)
        sample.probedAtNanos = sw_monotonic_ns()
        readWaitUnderWay(
            &sample.probe, since: evidence.samples.last?.probe?.cpuNanos ?? evidence.stallStartSchedule?.cpuNanos)
        if var probe = sample.probe, let wait = probe.wait, wait.isRestart,
            let before = evidence.samples.last?.probe?.wait, !before.isRestart, wait.isSameCall(as: before)
        {
            probe.wait = before
            probe.syscall = before.number
            sample.probe = probe
        }
        if let probe = sample.probe, let wait = probe.wait, wait.kind == .lock, wait.number == 72 || wait.number == 73 {
            sample.fileLockHolder = FileLockHolder.holder(pid: pid, wait: wait)
        } else if let probe = sample.probe, probe.syscallKind == .lock, let wait = probe.wait {
            let threads = Set(ThreadProbe.threadIDs(pid: pid))
            let owner = LockOwner.owner(pid: pid, wait: wait, threads: threads)
            sample.lockOwner = owner?.threadID
            sample.lockOwnerSource = owner?.source
            // A lock whose word names no owner may record one in a structure of its own; read once per call (a
            // sample in the same call as the one before waits for the same lock).
            if sample.lockOwner == nil {
                if let before = evidence.samples.last, let previous = before.probe?.wait, wait.isSameCall(as: previous)
                {
                    sample.recordedHolder = before.recordedHolder
                    sample.recordedCycle = before.recordedCycle
                } else {
                    sample.recordedHolder = RecordedHolder.find(
                        pid: pid, waiter: thread.threadID, wait: wait, threads: threads)
                    sample.recordedCycle = sample.recordedHolder.flatMap {
                        RecordedHolder.cycle(pid: pid, loop: thread.threadID, holder: $0.threadID, threads: threads)
                    }
                }
            }
        }
        if let sampler = target.sampler {
            let taken = sampler.sample(thread, configuration: configuration)
            sample.frames = taken.frames
            sample.pauseNanos = taken.pauseNanos
            sample.unwindNanos = taken.unwindNanos
            sample.error = taken.error
            sample.unstopped = taken.unstopped
            sample.stopWaitNanos = taken.stopWaitNanos
            sample.stopWait = taken.stopWait
            sample.capturedAtNanos = taken.capturedAtNanos
            // The sample's moment is the capture's, not the request's: the probe and the stop can take tens of ms
            // on a loaded machine, and the stack is the thread's state at the capture.
            if let at = taken.capturedAtNanos, at >= evidence.stall.startNanos {
                sample.offsetNanos = at - evidence.stall.startNanos
            }
            var failure = taken.failure
            // "running" in /proc, stopped at the boundary of a file or socket call: the one it was working in (a
            // write into the page cache). Other calls are left to /proc: an event wait must be judged against the
            // loop's own idle wait, which a sample does not know.
            if sample.probe != nil, sample.probe?.syscall == nil, let call = taken.stopSyscall,
                SyscallTable.kind(call) == .io
            {
                sample.probe?.syscall = call
                sample.stopCall = true
            }
            // Left alone while it leaves a call (woken from it, waiting for a CPU, while /proc says "running"): still
            // in that call.
            if sample.probe != nil, sample.probe?.syscall == nil, let call = taken.leavingCall {
                sample.probe?.wait = call
                sample.probe?.syscall = call.number
            }
            // A thread that would not stop is working inside the kernel, where /proc/…/syscall says only
            // "running": its kernel stack, read while it is still there, names the call.
            if taken.timedOut, sample.probe != nil, sample.probe?.syscall == nil,
                let call = KernelStack.read(pid: pid, tid: thread.threadID).flatMap(KernelStack.syscall(in:))
            {
                sample.probe?.syscall = call
                sample.kernelStackCall = true
                let inside = " (inside \(SyscallTable.name(call)), by its kernel stack)"
                failure = failure.map { $0 + inside }
                sample.error = sample.error.map { $0 + inside }
            }
            if let failure { evidence.captureErrors.append("sample \(evidence.samples.count): \(failure)") }
        } else {
            sample.error = "no sampler"
        }
        readOtherProcesses(&sample, before: evidence.samples.last)
        if evidence.peerStack == nil { capturePeer(behind: sample, into: &evidence) }
        evidence.samples.append(sample)
        if let owner = sample.lockOwner, listedThreads?.contains(owner) == false {
            self.evidence = evidence
            addLockOwner(owner, foundAt: evidence.samples.count - 1)
            evidence = self.evidence ?? evidence
        }
        return sample
    }

    /// After the capture (it is slower than the probe): another process behind the wait — a SysV semaphore's last
    /// operator, a pipe's or socket's other end, the processes mapping a process-shared lock — or a timed wait on
    /// the process's own wake-ups, a sleep. A sample in
    /// the same call as the one before keeps what that one found rather than scan every process again.
    private func readOtherProcesses(_ sample: inout StallEvidence.Sample, before: StallEvidence.Sample?) {
        guard let wait = sample.probe?.wait, wait.number != nil else { return }
        if let before, let previous = before.probe?.wait, wait.isSameCall(as: previous) {
            sample.otherProcess = before.otherProcess
            sample.ownWakeupSleep = before.ownWakeupSleep
            sample.sharedLock = before.sharedLock
            return
        }
        let look = OtherProcessLook.read(pid: pid, wait: wait, sharedLocks: sample.lockOwner == nil)
        sample.sharedLock = look.sharedLock
        sample.otherProcess = look.otherProcess
        sample.ownWakeupSleep = look.ownWakeupSleep
    }

    /// Samples the stuck thread if a sample is due (between the threads of a snapshot).
    private mutating func takeSampleIfDue() {
        if let due = nextSampleAt, sw_monotonic_ns() >= due { takeSample(now: sw_monotonic_ns()) }
    }

    /// Adds to the stall's threads the thread `owner` that a sample (number `index`) found holding the lock the
    /// stuck thread waits for, when the snapshot lacks it, with the owner chain behind it (up to 16 threads):
    /// read now, while it still holds the lock.
    ///
    /// The snapshot lists the threads there were when it was read, at the stall's first sample; a stall that began
    /// with other work (creating threads, say) and only then waited for a lock may wait for a thread started
    /// since. Without this the report would name the holder by id alone (and by the time the snapshot is over
    /// the holder may have released the lock and exited). A note says the thread's state and stack are from a
    /// later sample.
    private mutating func addLockOwner(_ owner: Int32, foundAt index: Int) {
        guard let listed = listedThreads, !listed.contains(owner) else { return }
        let me = pid == getpid() ? sw_gettid() : 0
        var next: Int32? = owner
        var added = 0
        while let tid = next, tid != me, listedThreads?.contains(tid) == false, added < 16,
            let probe = ThreadProbe.read(pid: pid, tid: tid)
        {
            listedThreads?.insert(tid)
            added += 1
            var snapshot = StallReport.ThreadSnapshot(
                threadId: tid, name: probe.name, state: probe.state, wchan: probe.wchan, syscall: probe.syscallName)
            next = nil
            if probe.syscallKind == .lock, let wait = probe.wait {
                snapshot.waitAddress = probe.syscallArg0
                next = LockOwner.owner(pid: pid, wait: wait, threads: Set(ThreadProbe.threadIDs(pid: pid)))?.threadID
                snapshot.waitingForThreadId = next
            }
            var frames: [UnwoundFrame] = []
            if let sampler = target.sampler {
                let taken = sampler.sampleThread(id: tid, configuration: configuration)
                frames = taken.frames
                snapshot.error = taken.error
            }
            lateThreads.append(StallEvidence.Thread(snapshot: snapshot, frames: frames))
            evidence?.notes.append(
                "thread \(tid) (\(probe.name)) was not in the snapshot of the first sample (it started later): its "
                    + "state and stack are from sample \(index), where the loop waited for a lock it held")
        }
        mergeLateThreads()
    }

    /// Puts the threads ``addLockOwner(_:foundAt:)`` found into the stall's threads, right after the stuck thread
    /// (the owner chain matters most), once the snapshot is in.
    private mutating func mergeLateThreads() {
        guard snapshotDone, !lateThreads.isEmpty, var threads = evidence?.threads else { return }
        let position = threads.firstIndex { $0.snapshot.threadId == thread?.threadID } ?? -1
        threads.insert(contentsOf: lateThreads, at: position + 1)
        lateThreads = []
        evidence?.threads = threads
    }

    /// Every other thread's state and wait target at the first sample, in order of relevance (the loop, the owner
    /// chain of what it waits for, the threads waiting on those, then the rest: ``ThreadWaitGraph``). Stacks are
    /// taken for the first `maxThreads`; who-waits-for-whom is kept for every thread (up to 4096). The watching
    /// thread itself is left out. The stuck thread's samples go on between threads when due, so a process of many
    /// threads does not black out the stall's sampling; the process's maps are read once for the whole snapshot
    /// (``StackSampling/beginThreadSnapshot()``). Once the stall is over, no more samples or stacks are taken
    /// (they would show the loop after the stall, and threads no longer in the state that held it up): the
    /// remaining threads are listed with their state and an error saying so.
    private mutating func snapshotThreads(isOngoing: () -> Bool) -> [StallEvidence.Thread] {
        guard configuration.maxThreads > 0 else { return [] }
        target.sampler?.beginThreadSnapshot()
        let me = pid == getpid() ? sw_gettid() : 0
        let loopTID = thread?.threadID
        var over = false
        // The stuck thread, then the owner of the lock its samples saw it wait for: right after the first sample
        // the thread itself may be running, on its way back into the wait our stop interrupted.
        let sampledOwner = evidence?.samples.last(where: { $0.lockOwner != nil })?.lockOwner
        let first = [loopTID, sampledOwner].compactMap { $0 }
        // Once the stall is over the rest of the threads are not read: their states would be those after it (and
        // on a loaded machine reading thousands takes seconds, which would hold up the stall's end).
        var graph = ThreadWaitGraph.read(pid: pid, excluding: [me], first: first, listed: { listedThreads = $0 }) {
            if !over, isOngoing() { takeSampleIfDue() } else { over = true }
            return !over
        }
        if over, let listed = listedThreads, listed.count > graph.probes.count {
            evidence?.notes.append(
                "the stall ended while the process's threads were read: \(listed.count - graph.probes.count) of "
                    + "\(listed.count) are not listed")
        }
        // The stuck thread seen out of its lock wait as the graph was read (restarting it after our stop, or woken
        // and losing the lock again): the owner its samples read is still the one it waits for.
        if let loopTID, graph.waitsFor[loopTID] == nil,
            let owner = evidence?.samples.last(where: { $0.lockOwner != nil })?.lockOwner
        {
            var edges = graph.waitsFor
            edges[loopTID] = owner
            graph = ThreadWaitGraph(probes: graph.probes, waitsFor: edges)
        }
        let holders = Set(graph.waitsFor.values)
        var result: [StallEvidence.Thread] = []
        for (index, tid) in graph.relevanceOrder(loop: loopTID).prefix(4096).enumerated() {
            if !over, isOngoing() { takeSampleIfDue() } else { over = true }
            guard var probe = graph.probes[tid] else { continue }
            // The stuck thread read right after the first sample's stop may show `restart_syscall` (the stop ends a
            // timed wait, which the kernel resumes), or no call at all (runnable on its way back into the wait the
            // stop interrupted, which a loaded machine makes last): the first sample's own probe, read just before
            // the capture, has the call and what it waits on.
            if tid == loopTID, probe.wait?.isRestart == true || probe.wait?.inSyscall != true,
                let before = evidence?.samples.first?.probe, before.wait?.isRestart == false,
                before.wait?.inSyscall == true
            {
                probe = before
            }
            let waitsFor = graph.waitsFor[tid]
            // Past the stack cap, only threads that are part of the wait graph are listed.
            let withStack = index < configuration.maxThreads
            if !withStack, waitsFor == nil, !holders.contains(tid) { continue }
            var frames: [UnwoundFrame] = []
            var snapshot = StallReport.ThreadSnapshot(
                threadId: tid, name: probe.name, state: probe.state, wchan: probe.wchan, syscall: probe.syscallName)
            if probe.syscallKind == .lock, let address = probe.syscallArg0 {
                snapshot.waitAddress = address
                snapshot.waitingForThreadId = waitsFor
            }
            if tid == loopTID, let first = evidence?.samples.first {
                frames = first.frames
                snapshot.error = first.error
            } else if withStack, over {
                snapshot.error = "the stall ended before this thread's stack was taken"
            } else if withStack, let sampler = target.sampler {
                var taken = sampler.sampleThread(id: tid, configuration: configuration)
                // What holds the stuck thread up is the stack a reader wants most: a capture of a holder that
                // failed (a loaded machine can leave a woken thread no CPU to reach the stop in time) is tried
                // again while the stall lasts, up to four times, the stuck thread's samples kept up in between.
                var tries = 1
                while taken.frames.isEmpty, holders.contains(tid) || tid == sampledOwner, tries < 5, isOngoing() {
                    takeSampleIfDue()
                    tries += 1
                    var again = sampler.sampleThread(id: tid, configuration: configuration)
                    if !again.frames.isEmpty {
                        again.error =
                            taken.error.map { "first capture: \($0); taken again (try \(tries))" } ?? again.error
                        taken = again
                    }
                }
                frames = taken.frames
                snapshot.error = taken.error
            }
            result.append(StallEvidence.Thread(snapshot: snapshot, frames: frames))
        }
        return result
    }
}
