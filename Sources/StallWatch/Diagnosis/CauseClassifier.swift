// Deciding a stall's cause from the evidence gathered while it lasted. Pure: no I/O.

/// Classifies a stall as cpu, lock, io, sleep, deadlock or unknown from the loop thread's samples, its CPU time
/// and the other threads' waits.
package enum CauseClassifier {
    /// One look at the loop thread during the stall.
    package struct Observation: Sendable, Equatable {
        var state: String
        var syscall: Int?
        var wchan: String?
        /// Symbols of the sample's frames, innermost first (may be empty).
        var symbols: [String]
        /// The owner of the lock the loop waited on at this sample, if it could be read.
        var lockOwner: Int32?
        /// Where the lock recorded `lockOwner`.
        var lockOwnerSource: LockOwner.Source?
        /// The thread the lock's own structure records as its holder, when the lock word names none.
        var recordedHolder: RecordedHolder.Finding?
        /// A cycle of lock waits through recorded holders back to the loop thread, from it on.
        var recordedCycle: [Int32]?
        /// The call's class judged by its arguments too (``ThreadWait/kind``), when they were read.
        var waitKind: SyscallTable.Kind?
        /// The capture could not stop the thread in time: it was working inside the kernel (a long write).
        var captureTimedOut = false
        /// The process holding the file lock the loop waited for at this sample (`/proc/locks`).
        var fileLockHolder: FileLockHolder.Holder?
        /// Another process behind the loop's wait at this sample, or why none could be named.
        var otherProcess: OtherProcessWait?
        /// The wait was a timed one on the process's own wake-up descriptors: why that is a sleep.
        var ownWakeupSleep: String?
        /// The lock waited on is process-shared: the processes that may hold it.
        var sharedLock: SharedLock.Finding?
        /// In uninterruptible sleep outside any system call (its `syscall` file read so): a page fault waiting for
        /// the disk.
        var inPageFault = false
        /// How long the capture waited for the thread to stop (ptrace captures only).
        var stopWaitNanos: UInt64?

        init(
            state: String, syscall: Int?, wchan: String?, symbols: [String] = [], lockOwner: Int32? = nil,
            waitKind: SyscallTable.Kind? = nil, captureTimedOut: Bool = false,
            fileLockHolder: FileLockHolder.Holder? = nil, otherProcess: OtherProcessWait? = nil,
            ownWakeupSleep: String? = nil, sharedLock: SharedLock.Finding? = nil
        ) {
            self.sharedLock = sharedLock
            self.fileLockHolder = fileLockHolder
            self.otherProcess = otherProcess
            self.ownWakeupSleep = ownWakeupSleep
            self.state = state
            self.syscall = syscall
            self.wchan = wchan
            self.symbols = symbols
            self.lockOwner = lockOwner
            self.waitKind = waitKind
            self.captureTimedOut = captureTimedOut
        }
    }

    struct Evidence: Sendable {
        var loopThreadID: Int32
        var observations: [Observation]
        var wallNanos: UInt64
        /// CPU time the loop thread used during the stall.
        var loopCPUNanos: UInt64?
        /// Every thread at the first sample.
        var threads: [StallReport.ThreadSnapshot]
        /// Time the loop thread was runnable but waiting for a CPU (schedstat), over the same span as
        /// `loopCPUNanos`.
        var loopRunQueueWaitNanos: UInt64?
        /// Time the process's cgroup was throttled by its CPU quota during the stall.
        var throttledNanos: UInt64?
        /// How late the watcher itself woke during the stall, in all.
        var lateWakeupNanos: UInt64 = 0
        /// The stall threshold: a loop that used a small part of it in CPU had little work of its own.
        var thresholdNanos: UInt64?
        /// The busiest disk over the stall: the share of the time it was doing I/O (0…1), the bytes it moved, and
        /// the bytes of storage I/O the process itself caused.
        var disk: (busyShare: Double, bytes: UInt64, processBytes: UInt64?)?
        /// The whole stall so far (from its start), when `wallNanos` (the span the CPU and run-queue figures cover)
        /// is only its later part: the loop's own work over the whole stall is estimated from that span's shares.
        var stallNanos: UInt64?

        init(
            loopThreadID: Int32, observations: [Observation], wallNanos: UInt64, loopCPUNanos: UInt64?,
            threads: [StallReport.ThreadSnapshot]
        ) {
            self.loopThreadID = loopThreadID
            self.observations = observations
            self.wallNanos = wallNanos
            self.loopCPUNanos = loopCPUNanos
            self.threads = threads
        }
    }

    /// What one observation says the loop was doing.
    enum Activity: Hashable {
        case cpu, lock, io, sleep, idle, other
        /// Woken from a wait and waiting for a CPU (``wokenWaitingForCPU(_:)``).
        case runnable
    }

    /// A stop that comes this long after the interrupt, for a thread in a wait that stops at once, was held up by
    /// the thread's wait for a CPU.
    static let wokenStopNanos: UInt64 = 10_000_000

    /// The thread was woken from a wait and was waiting for a CPU at this sample: runnable (`R`) and in no call by
    /// /proc (the kernel reads a runnable thread's call only while it blocks), its stack in the wrapper of a wait
    /// that a ptrace interrupt ends at once (a futex, a sleep, an event wait), and the capture's stop long in
    /// coming — a thread stops as soon as it runs, so the wait was for a CPU. A thread blocked in the wait reads
    /// `S` with its call; one working in user space is not in the wrapper.
    static func wokenWaitingForCPU(_ o: Observation) -> Bool {
        guard o.state == "R", o.syscall == nil, let stopWait = o.stopWaitNanos, stopWait >= wokenStopNanos,
            let number = o.symbols.first.flatMap(SyscallTable.number(forWrapperSymbol:))
        else { return false }
        return [.lock, .sleep, .idleWait].contains(SyscallTable.kind(number))
    }

    /// Whether a stack is a Dispatch pool thread parked in the pool's own wait for work: libdispatch's worker entry
    /// (`_dispatch_worker_thread`) right outside the semaphore wait it parks in, nothing of the program between. Such
    /// a thread holds no queue, whatever a queue's drain lock last said of it.
    static func idleInDispatchPool(_ symbols: [String]) -> Bool {
        guard let entry = symbols.firstIndex(of: "_dispatch_worker_thread"), entry > 0 else { return false }
        let plumbing = ["__futex", "futex", "__new_sem_wait", "sem_", "_dispatch_sema4_", "_dispatch_semaphore_wait"]
        return symbols[..<entry].allSatisfy { symbol in plumbing.contains { symbol.hasPrefix($0) } }
    }

    static func activity(of o: Observation) -> Activity {
        if o.state == "D" { return .io }
        if wokenWaitingForCPU(o) { return .runnable }
        // "running" may be running inside a system call: the innermost frame (a libc wrapper) tells.
        guard let syscall = o.syscall ?? o.symbols.first.flatMap(SyscallTable.number(forWrapperSymbol:)) else {
            // A thread in user space stops at once; one that did not stop in time was inside the kernel.
            if o.captureTimedOut { return .io }
            return o.state == "R" ? .cpu : .other
        }
        if o.ownWakeupSleep != nil { return .sleep }
        if syscall == 219, let restarted = restartedActivity(symbols: o.symbols) { return restarted }
        switch o.syscall == nil ? SyscallTable.kind(syscall) : (o.waitKind ?? SyscallTable.kind(syscall)) {
        case .lock: return .lock
        case .io: return .io
        case .sleep: return .sleep
        case .idleWait: return .idle
        case .other: return o.state == "R" ? .cpu : .other
        }
    }

    /// restart_syscall (219) is what /proc shows for a sleep, timed futex wait or poll resumed after a stop (a
    /// sidecar's ptrace interrupt, a debugger, SIGSTOP/SIGCONT); the innermost frame says which call it continues.
    static func restartedActivity(symbols: [String]) -> Activity? {
        guard let top = symbols.first?.lowercased() else { return nil }
        if top.contains("nanosleep") || top.contains("usleep") || top.hasPrefix("sleep") { return .sleep }
        if top.contains("lll_lock") || top.contains("futex") || top.contains("mutex") || top.contains("cond_") {
            return .lock
        }
        if top.contains("poll") || top.contains("select") { return .idle }
        return nil
    }

    /// Under this share of the span in CPU, samples that caught the loop thread running were instants
    /// (``classify(_:)``).
    static let instantCPUShare = 0.1

    static func classify(_ e: Evidence) -> StallReport.Cause {
        var evidence: [String] = []
        let total = e.observations.count
        var counts: [Activity: Int] = [:]
        let cpuShare = e.loopCPUNanos.map { e.wallNanos > 0 ? Double($0) / Double(e.wallNanos) : 0 }
        for o in e.observations {
            var kind = activity(of: o)
            // In user space inside a lock's acquisition (a mutex's lock between two of its futex waits) while the
            // thread used under half the stall in CPU: the lock wait seen between two sleeps — under contention
            // the thread is woken, waits for a CPU, and finds the lock taken again — not work of its own. A thread
            // spinning on a lock with most of the CPU stays `cpu`.
            if kind == .cpu, let cpuShare, cpuShare < 0.5, restartedActivity(symbols: o.symbols) == .lock {
                kind = .lock
            }
            counts[kind, default: 0] += 1
        }
        if let fact = cpuFact(e) { evidence.append(fact) }
        // Samples that caught the thread running in user space while it ran under a tenth of the span in CPU were
        // instants (the moments it had a CPU between its waits), not what the stall was made of: where other samples
        // caught it blocked in a call, those say what it waited for. (With no such sample the run queue's rules
        // below decide: a thread that never slept waited for a CPU; one that slept spent the stall in waits the
        // samples missed.)
        if let cpuShare, cpuShare < Self.instantCPUShare, let running = counts[.cpu], running > 0 {
            let blocked = [Activity.lock, .io, .sleep].reduce(0) { $0 + (counts[$1] ?? 0) }
            if blocked > 0 {
                counts[.cpu] = nil
                evidence.append(
                    "\(running) of \(total) samples caught the thread running in user space, but it ran "
                        + "\(Int((cpuShare * 100).rounded())) % of the span: instants between its waits, not the stall")
            }
        }
        guard total > 0 else {
            if let cpuShare, cpuShare >= 0.6 { return .init(kind: .cpu, evidence: evidence) }
            // No sample, but the kernel's figures: a loop that waited for a CPU for most of the stall was held up by
            // the machine — when they cover at least half of it (from about its start), not a moment at its end.
            if e.wallNanos * 2 >= (e.stallNanos ?? e.wallNanos),
                let starved = runQueueStarvation(e, evidence: evidence + ["no sample of the loop thread's state"])
            {
                return starved
            }
            return .init(kind: .unknown, evidence: evidence + ["no sample of the loop thread's state"])
        }
        // The dominant activity, by samples. A high CPU share overrides only samples that say nothing definite:
        // I/O that copies data (a large write into the page cache) uses CPU too, and is still I/O.
        var ranked = counts.sorted { ($0.value, rank($0.key)) > ($1.value, rank($1.key)) }
        if let cpuShare, cpuShare >= 0.6, let first = ranked.first?.key, first == .other || first == .idle {
            ranked.insert((key: .cpu, value: counts[.cpu] ?? 0), at: 0)
        }
        let (top, topCount) = (ranked[0].key, ranked[0].value)
        // A capture that timed out with no call known is no proof of a call: a runnable thread given no CPU cannot
        // reach the stop either; nor is an event wait seen as the stall ended (a starved loop re-entering its wait
        // after a capture).
        let unnamedTimeouts = e.observations.filter {
            $0.captureTimedOut && $0.state != "D" && $0.syscall == nil
                && $0.symbols.first.flatMap(SyscallTable.number(forWrapperSymbol:)) == nil
        }.count
        let inANamedCall = (top == .io && unnamedTimeouts < topCount) || top == .lock || top == .sleep
        // The run queue first, whatever call the samples caught the thread in (a sample is a moment; schedstat
        // covers the whole span): a loop that waited for a CPU for most of the stall, and whose own work would not
        // have made a stall, was held up by the machine.
        if let starved = runQueueStarvation(e, evidence: evidence, sampledInACall: inANamedCall) { return starved }
        // The quota and the watcher's own lateness say nothing of the loop thread itself: they count only where
        // the loop wanted a CPU (not blocked in a call).
        // An event wait counts only where the loop's own figures say it wanted a CPU for half the span (a starved
        // loop re-entering its wait after a capture); a loop that slept in it, as in a nested event wait, did not.
        let wantedCPU = e.loopRunQueueWaitNanos.map { ($0 &+ (e.loopCPUNanos ?? 0)) * 2 >= e.wallNanos } ?? true
        if top == .cpu || top == .other || (top == .idle && wantedCPU)
            || (top == .io && unnamedTimeouts >= topCount),
            let starved = starvation(e, evidence: evidence)
        {
            return starved
        }
        func share(_ n: Int) -> String { "\(n) of \(total) samples" }
        let syscallNames = e.observations.compactMap {
            ($0.syscall ?? $0.symbols.first.flatMap(SyscallTable.number(forWrapperSymbol:))).map(SyscallTable.name)
        }
        let commonSyscall = mostCommon(syscallNames)

        switch top {
        case .cpu:
            evidence.append("\(share(counts[.cpu] ?? 0)): running on a CPU, not in a system call")
            return .init(kind: .cpu, evidence: evidence)
        case .sleep:
            evidence.append("\(share(topCount)): in \(commonSyscall ?? "nanosleep")")
            if let why = mostCommon(e.observations.compactMap(\.ownWakeupSleep)) { evidence.append(why) }
            return .init(kind: .sleep, evidence: evidence)
        case .io:
            let dState = e.observations.filter { $0.state == "D" }.count
            evidence.append("\(share(topCount)): in I/O" + (commonSyscall.map { " (\($0))" } ?? ""))
            let timedOut = e.observations.filter(\.captureTimedOut).count
            if timedOut > 0 {
                evidence.append(
                    "\(share(timedOut)): the thread did not stop for a capture in time: it was working inside the "
                        + "kernel, not in user space")
            }
            if dState > 0 { evidence.append("\(share(dState)): in uninterruptible disk sleep (state D)") }
            let faults = e.observations.filter(\.inPageFault).count
            if faults > 0 {
                evidence.append(
                    "\(share(faults)): in a page fault, not a system call: waiting for the disk to read in code or "
                        + "data the thread touched")
            }
            if faults == topCount, let starved = diskStarvation(e, evidence: evidence) { return starved }
            return peerCause(e, evidence: evidence)
        case .lock:
            return lockCause(e, lockSamples: topCount, total: total, evidence: evidence)
        case .idle:
            // Never the loop's own idle wait (the loop would not be stalled): a wait on descriptors nested in a
            // callback — a client's poll, a subprocess runner's own event loop.
            evidence.append(
                "\(share(topCount)): in an event wait (\(commonSyscall ?? "?")) inside a callback, not the loop's "
                    + "own idle wait (a nested wait on descriptors)")
            return peerCause(e, evidence: evidence)
        case .runnable:
            // Every such sample measured a wait for a CPU: the stop came only once the thread ran.
            let waits = e.observations.filter(wokenWaitingForCPU).compactMap(\.stopWaitNanos).sorted()
            let calls = e.observations.filter(wokenWaitingForCPU).compactMap {
                $0.symbols.first.flatMap(SyscallTable.number(forWrapperSymbol:)).map(SyscallTable.name)
            }
            let range =
                waits.first == waits.last
                ? "\(waits[0] / 1_000_000) ms" : "\(waits[0] / 1_000_000)–\(waits[waits.count - 1] / 1_000_000) ms"
            evidence.append(
                "\(share(topCount)): woken from its wait (\(mostCommon(calls) ?? "?")) and waiting for a CPU: the "
                    + "capture waited \(range) for the thread to run, and a thread in that wait stops as soon as it does"
            )
            if let fact = runQueueFact(e) { evidence.append(fact) }
            evidence.append("its wait had ended: likely the machine held the loop up")
            return .init(kind: .starved, evidence: evidence)
        case .other:
            evidence.append("\(share(topCount)): in \(commonSyscall ?? "an unclassified state")")
            return .init(kind: .unknown, evidence: evidence)
        }
    }

    /// What the loop thread's CPU time says over the measured span, as a sentence.
    static func cpuFact(_ e: Evidence) -> String? {
        guard let cpu = e.loopCPUNanos else { return nil }
        let share = e.wallNanos > 0 ? Double(cpu) / Double(e.wallNanos) : 0
        return "the loop thread used \(cpu / 1_000_000) ms of CPU in \(e.wallNanos / 1_000_000) ms "
            + "(\(Int((share * 100).rounded()))%)"
    }

    /// What the run queue says over the measured span: how long the loop thread waited for a CPU, as a sentence.
    static func runQueueFact(_ e: Evidence) -> String? {
        guard let wait = e.loopRunQueueWaitNanos, wait > 0 else { return nil }
        return "the loop thread waited \(wait / 1_000_000) ms for a CPU (run queue) and ran "
            + "\((e.loopCPUNanos ?? 0) / 1_000_000) ms in \(e.wallNanos / 1_000_000) ms"
    }

    /// `starved` when the loop thread waited in the run queue for at least half the stall and its own work — the
    /// stall without that wait — stayed under the threshold: without the machine's other work there would have
    /// been no stall, whatever call the samples caught the thread in. Under plain oversubscription a loop with a
    /// stall of its own work still gets its share of a CPU (half, among two takers), and its own work alone crosses
    /// the threshold: that is its own stall, slowed, and not starvation.
    ///
    /// When the figures cover only the stall's later part (in-process, from the first sample), the own work of the
    /// part before is estimated from the measured shares for a loop sampled runnable; one sampled in a call (a
    /// write, a futex, a sleep) has evidence of a wait of its own, so the run queue must prove starvation on what
    /// was measured alone: the unmeasured part counts as its own work.
    static func runQueueStarvation(_ e: Evidence, evidence: [String], sampledInACall: Bool = false)
        -> StallReport.Cause?
    {
        guard e.wallNanos > 0, let wait = e.loopRunQueueWaitNanos else { return nil }
        let waitShare = min(1, Double(wait) / Double(e.wallNanos))
        let stall = Double(max(e.stallNanos ?? e.wallNanos, e.wallNanos))
        let ownWork = sampledInACall ? stall - Double(min(wait, e.wallNanos)) : stall * (1 - waitShare)
        // With no threshold known, its own work must at least be shorter than its wait.
        // (Not `map(Double.init)`: on a UInt64 that reference resolves to `init(bitPattern:)`.)
        let limit = e.thresholdNanos.map { Double($0) } ?? stall * waitShare
        guard waitShare >= 0.5, ownWork < limit else { return nil }
        var facts = runQueueFact(e).map { [$0] } ?? []
        // A throttled cgroup's runnable threads wait in the run queue meanwhile: the quota is part of that wait.
        if let throttled = e.throttledNanos, throttled > 0 {
            facts.append("the cgroup's CPU quota throttled the process for \(throttled / 1_000_000) ms")
        }
        facts.append(
            "without that wait the stall would have been about \(Int((ownWork / 1_000_000).rounded())) ms"
                + (e.thresholdNanos.map { ", under the \($0 / 1_000_000) ms threshold" } ?? "")
                + ": the machine held the loop up")
        return .init(kind: .starved, evidence: evidence + facts)
    }

    /// `starved` when every I/O sample caught the loop in a page fault (not a read or write it asked for) while the
    /// disk was busy for most of the stall with other processes' I/O: a page that takes a millisecond to read on
    /// an idle disk waited behind the machine's other work. Not when the process itself moved a good part of the
    /// disk's bytes (its own writes fill the queue its faults wait in).
    static func diskStarvation(_ e: Evidence, evidence: [String]) -> StallReport.Cause? {
        guard let disk = e.disk, let own = disk.processBytes, disk.busyShare >= 0.8, disk.bytes > own else {
            return nil
        }
        let others = disk.bytes - own
        guard others >= 16 << 20, others >= 4 * own else { return nil }
        func mebibytes(_ bytes: UInt64) -> String { "\(Int((Double(bytes) / 1_048_576).rounded())) MiB" }
        return .init(
            kind: .starved,
            evidence: evidence + [
                "the disk was busy \(Int((disk.busyShare * 100).rounded()))% of the stall moving \(mebibytes(disk.bytes)), "
                    + "\(mebibytes(others)) of it other processes' I/O (the process's own: \(mebibytes(own))): the "
                    + "machine held the loop up"
            ])
    }

    /// `starved` when the loop thread, wanting a CPU and using under a quarter of the threshold in CPU, had its
    /// cgroup throttled or the watcher itself not scheduled for much of the stall: the loop's code did not hold it
    /// up, the machine did.
    static func starvation(_ e: Evidence, evidence: [String]) -> StallReport.Cause? {
        guard e.wallNanos > 0 else { return nil }
        let wall = Double(e.wallNanos)
        let cpu = e.loopCPUNanos ?? 0
        // A loop that used a good part of the threshold in CPU over the sampled span had a stall of its own work,
        // slowed by the machine: that is `cpu`.
        if let threshold = e.thresholdNanos, cpu * 4 >= threshold { return nil }
        var facts = runQueueFact(e).map { [$0] } ?? []
        var starved = false
        if let throttled = e.throttledNanos, throttled > 0 {
            facts.append("the cgroup's CPU quota throttled the process for \(throttled / 1_000_000) ms")
            if Double(throttled) >= 0.3 * wall, Double(cpu) < 0.6 * wall { starved = true }
        }
        if e.lateWakeupNanos > 0 {
            facts.append("the watcher itself woke \(e.lateWakeupNanos / 1_000_000) ms late: the machine was busy")
            if Double(e.lateWakeupNanos) >= 0.3 * wall, Double(cpu) < 0.6 * wall { starved = true }
        }
        guard starved else { return nil }
        return .init(kind: .starved, evidence: evidence + facts)
    }

    private static func lockCause(_ e: Evidence, lockSamples: Int, total: Int, evidence: [String]) -> StallReport.Cause
    {
        var evidence = evidence
        let wchan = mostCommon(e.observations.compactMap(\.wchan))
        if let semaphore = semaphoreCause(e, total: total, evidence: evidence) { return semaphore }
        // A file lock: the kernel records who holds it.
        if let holder = mostCommon(e.observations.compactMap(\.fileLockHolder)) {
            let call = mostCommon(e.observations.compactMap(\.syscall)).map(SyscallTable.name) ?? "flock"
            let samples = e.observations.filter { $0.fileLockHolder == holder }.count
            evidence.append("\(samples) of \(total) samples: waiting for a file lock in \(call)")
            evidence.append(
                "the file lock (\(holder.lock)) is held by process \(holder.processID)"
                    + (holder.name.isEmpty ? "" : " (\(holder.name))") + ", \(holder.source)")
            return .init(kind: .lock, evidence: evidence, blockingProcess: .fileLock(holder))
        }
        // Samples taken between two futex waits of the same lock (in user space inside its lock call) count too.
        let between = lockSamples - e.observations.filter { activity(of: $0) == .lock }.count
        evidence.append(
            "\(lockSamples) of \(total) samples: waiting in futex" + (wchan.map { " (wchan \($0))" } ?? "")
                + (between > 0 ? "; \(between) of them runnable between two waits, inside the lock call" : ""))
        guard let owner = mostCommon(e.observations.compactMap(\.lockOwner)) else {
            // No readable owner: a synchronous hand-off to another thread (a dispatch sync, a condition) or a lock
            // of unknown layout.
            let loopWait = e.threads.first { $0.threadId == e.loopThreadID }?.waitAddress
            // A thread waiting for a lock the loop is recorded to hold: the loop's own lock records no owner, so
            // that thread holding it is likely, not proven.
            if let waiter = threadWaitingOnLoop(e) {
                evidence.append(
                    "thread \(waiter.threadId) (\(waiter.name)) waits for a lock the loop thread holds; the loop's "
                        + "lock records no owner: likely a deadlock")
                let holder = StallReport.Cause.CandidateHolder(
                    threadId: waiter.threadId, name: waiter.name,
                    reason: "waits for a lock whose recorded owner is the loop thread", confidence: .likely)
                return .init(
                    kind: .deadlock, evidence: evidence, deadlockedThreadIds: [e.loopThreadID, waiter.threadId],
                    deadlockCertainty: .likely, candidateHolders: [holder])
            }
            if let shared = mostCommon(e.observations.compactMap(\.sharedLock)) {
                return sharedLockCause(shared, evidence: evidence)
            }
            evidence.append("the lock's owner could not be read (not a glibc mutex, or a condition/semaphore)")
            let candidates = candidateHolders(e, loopWaitAddress: loopWait)
            if let recorded = mostCommon(e.observations.compactMap(\.recordedHolder)) {
                return recordedHolderCause(recorded, e, candidates: candidates, evidence: evidence)
            }
            if let sentence = candidateSentence(candidates) { evidence.append(sentence) }
            if let other = likelyCycle(e, loopWaitAddress: loopWait) {
                evidence.append(
                    "thread \(other.threadId) (\(other.name)) waits on another lock that records no owner, whose best "
                        + "candidate holder is the loop thread: likely a deadlock")
                return .init(
                    kind: .deadlock, evidence: evidence, deadlockedThreadIds: [e.loopThreadID, other.threadId],
                    deadlockCertainty: .likely, candidateHolders: holderData(candidates, likely: other.threadId))
            }
            return .init(kind: .lock, evidence: evidence, candidateHolders: holderData(candidates))
        }
        if owner == e.loopThreadID {
            evidence.append("the loop thread waits for a lock it already holds (a non-reentrant lock re-entered)")
            return .init(
                kind: .deadlock, evidence: evidence, blockingThreadId: owner, deadlockedThreadIds: [owner],
                deadlockCertainty: .proven)
        }
        let ownerThread = e.threads.first { $0.threadId == owner }
        let ownerName = ownerThread.map { " (\($0.name))" } ?? ""
        let source = e.observations.first { $0.lockOwner == owner }?.lockOwnerSource
        evidence.append(
            "the lock is held by thread \(owner)\(ownerName)" + (source.map { ", as its \($0.rawValue) records" } ?? "")
        )
        // Follow the chain of waits from the owner: back to the loop thread is a deadlock.
        var chain = [e.loopThreadID, owner]
        var current = ownerThread
        while let thread = current, let next = thread.waitingForThreadId, chain.count <= 16 {
            if next == e.loopThreadID {
                evidence.append(
                    chain.dropFirst().map { "thread \($0)" }.joined(separator: " → ")
                        + " waits for a lock the loop thread holds")
                return .init(
                    kind: .deadlock, evidence: evidence, blockingThreadId: owner, deadlockedThreadIds: chain,
                    deadlockCertainty: .proven)
            }
            guard !chain.contains(next) else { break }
            chain.append(next)
            current = e.threads.first { $0.threadId == next }
        }
        if let ownerThread {
            let doing = ownerThread.syscall.map { "in \($0)" } ?? "running"
            evidence.append("thread \(owner) is \(ownerThread.stateDescription), \(doing)")
        }
        return .init(kind: .lock, evidence: evidence, blockingThreadId: owner)
    }

    /// A thread that waits for a lock owned by the loop thread (the other half of a deadlock).
    private static func threadWaitingOnLoop(_ e: Evidence) -> StallReport.ThreadSnapshot? {
        e.threads.first { $0.threadId != e.loopThreadID && $0.waitingForThreadId == e.loopThreadID }
    }

    private static func rank(_ a: Activity) -> Int {
        switch a {
        case .lock: return 5
        case .io: return 4
        case .sleep: return 3
        case .cpu: return 2
        case .idle: return 1
        case .other: return 0
        case .runnable: return -1
        }
    }

    static func mostCommon<T: Hashable>(_ values: [T]) -> T? {
        var counts: [T: Int] = [:]
        var order: [T] = []
        for v in values {
            if counts[v] == nil { order.append(v) }
            counts[v, default: 0] += 1
        }
        return order.max { counts[$0]! < counts[$1]! }
    }
}

extension StallReport.ThreadSnapshot {
    var stateDescription: String {
        switch state {
        case "R": return "running"
        case "S": return "sleeping"
        case "D": return "in disk sleep"
        case "T", "t": return "stopped"
        default: return "in state \(state)"
        }
    }
}
