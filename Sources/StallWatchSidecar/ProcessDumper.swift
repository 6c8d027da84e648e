// ProcessDumper: the stacks of a live process now (`stallwatch dump`), one thread stopped at a time.
import CStallWatchCore
import Foundation
import StallWatch

#if canImport(Glibc)
    import Glibc
#endif

/// Takes a ``ProcessDump`` of another process, as `eu-stack -p` or `py-spy dump` would, with what StallWatch
/// knows about waits: every thread's /proc state and wait target, and who owns the lock it waits for.
///
/// The wait graph is read first, from /proc and the lock words, without stopping anyone (a stop would turn a
/// timed wait into `restart_syscall`). Then each chosen thread is captured by ``PtraceStackSampling`` — seized,
/// interrupted, copied and detached before the next is touched, so only one thread of the target is ever stopped
/// and never for longer than one copy; the kernel restarts the call it was in (no EINTR). Unwinding and
/// symbolication run after every thread is running again.
package struct ProcessDumper: Sendable {
    package var processID: Int32
    /// Every thread's stack, idle ones included (by default an idle thread is listed without one).
    package var allThreads: Bool
    /// Loop threads named by id (`--tid`).
    package var loopThreadIDs: [Int32]
    /// Loop threads named by a glob over thread names (`--threads [PROGRAM=]GLOB`).
    package var threadRules: [LoopThreadRule]
    /// Frames, stack bytes, capture timeout and symbolication mode.
    package var configuration: StallWatchConfiguration
    /// Where heartbeat segments name the process's loop threads.
    package var heartbeatDirectory: String

    package init(
        processID: Int32, allThreads: Bool = false, loopThreadIDs: [Int32] = [], threadRules: [LoopThreadRule] = [],
        configuration: StallWatchConfiguration = .init(), heartbeatDirectory: String? = nil
    ) {
        self.processID = processID
        self.allThreads = allThreads
        self.loopThreadIDs = loopThreadIDs
        self.threadRules = threadRules
        self.configuration = configuration
        self.heartbeatDirectory = heartbeatDirectory ?? configuration.heartbeatDirectoryPath
    }

    /// Dumps the process.
    ///
    /// - Throws: `.noSuchProcess` when it does not exist; `.permissionDenied` when its /proc files cannot be
    ///   read with ptrace rights (with what to check); `.notTraceable` when it exists but cannot be traced now
    ///   (this process, a zombie, a kernel thread, or a process another tracer — a debugger — is attached to).
    ///   A thread that exits or will not stop during the dump is an entry of `errors`, not a failure.
    package func dump() throws(SidecarError) -> ProcessDump {
        let pid = processID
        try Self.checkTraceable(pid)
        let graph = ThreadWaitGraph.read(pid: pid)
        let knownLoops = loopThreads()
        // How long each thread has not run, before any capture: a stop makes the thread run, which resets the
        // clock this reads.
        var blockedFor: [Int32: UInt64] = [:]
        for (tid, probe) in graph.probes where !probe.state.hasPrefix("R") {
            blockedFor[tid] = ThreadSchedule.notRunNanos(ProcDirectory(processID: pid, threadID: tid))
        }
        // A running thread: its voluntary context switches now, and when. The kernel keeps no start of a CPU-bound
        // run; a second look at the end (onCPUFor) tells whether the thread waited for anything in between.
        var firstLook: [Int32: (switches: UInt64, at: UInt64)] = [:]
        for (tid, probe) in graph.probes where probe.state.hasPrefix("R") {
            if let switches = ProcDirectory(processID: pid, threadID: tid).status()?.voluntarySwitches {
                firstLook[tid] = (switches, sw_monotonic_ns())
            }
        }
        var seen: [Int32: ProcessDump.Thread.Activity] = [:]
        for (tid, probe) in graph.probes {
            seen[tid] = DumpRanking.activity(
                state: probe.state, syscallKind: probe.syscallKind, ownerKnown: graph.waitsFor[tid] != nil)
        }
        let owners = Set(graph.waitsFor.values)
        // Without a known loop, the threads a guess may name get a stack too: the main thread, and those in an
        // event wait (read as they sit in the call, not stopped).
        let mayBeGuessed = graph.probes.filter {
            $0.key == pid || $0.value.syscallName.map(SyscallTable.isDescriptorEventWait) == true
        }
        let loops = Set(knownLoops.isEmpty ? Array(mayBeGuessed.keys) : knownLoops)

        let sampling = PtraceStackSampling(processID: pid, captureTimeoutNanos: configuration.intervals.captureTimeout)
        var limits = configuration
        limits.maxThreadFrames = configuration.maxFrames
        sampling.beginThreadSnapshot()
        var samples: [Int32: StackSample] = [:]
        var stopSwitches: [Int32: UInt64] = [:]
        func capture(_ tids: [Int32]) {
            for tid in tids where graph.probes[tid] != nil && samples[tid] == nil {
                // A stop is one or two voluntary switches of the thread: counted here, for onCPUFor.
                let switches = { ProcDirectory(processID: pid, threadID: tid).status()?.voluntarySwitches }
                let before = firstLook[tid] != nil ? switches() : nil
                samples[tid] = sampling.sampleThread(id: tid, configuration: limits)
                if let before, let after = switches(), after >= before {
                    stopSwitches[tid, default: 0] += after - before
                }
            }
        }
        // Stuck threads, loops and lock owners first (every thread with --all-threads); candidate holders, known
        // only once the stacks are read, after.
        capture(
            graph.probes.keys.sorted().filter {
                allThreads || seen[$0] != .idle || loops.contains($0) || owners.contains($0)
            })

        // Every thread runs again: now the slow part.
        let symbolicator = Symbolicator(processID: pid, mode: configuration.symbolication)
        var frames: [Int32: [StackFrame]] = [:]
        func symbolicateNew() {
            for (tid, sample) in samples where frames[tid] == nil {
                frames[tid] = symbolicator.symbolicate(sample.frames)
            }
        }
        symbolicateNew()
        func entries() -> [DumpRanking.Entry] {
            graph.probes.map { tid, probe in
                var snapshot = StallReport.ThreadSnapshot(
                    threadId: tid, name: probe.name, state: probe.state, wchan: probe.wchan,
                    syscall: probe.syscallName)
                if probe.syscallKind == .lock, let address = probe.syscallArg0 {
                    snapshot.waitAddress = address
                    snapshot.waitingForThreadId = graph.waitsFor[tid]
                }
                snapshot.frames = frames[tid] ?? []
                let activity = seen[tid] ?? DumpRanking.activity(ofOwnerlessFutexWaitWith: snapshot.frames)
                return .init(snapshot: snapshot, activity: activity, blockedForNanos: blockedFor[tid])
            }
        }
        let guessedLoops = knownLoops.isEmpty ? DumpRanking.guessedLoops(entries(), mainThread: pid) : []
        // A blocked thread on a lock whose word names no owner: the holder the lock's own structure records, read
        // from memory without a stop (for the first 64 such threads).
        var recorded: [Int32: RecordedHolder.Finding] = [:]
        let threadIDs = Set(graph.probes.keys)
        for entry in entries().sorted(by: { $0.snapshot.threadId < $1.snapshot.threadId })
        where entry.activity == .blocked && entry.snapshot.waitAddress != nil
            && entry.snapshot.waitingForThreadId == nil && recorded.count < 64
        {
            let tid = entry.snapshot.threadId
            if let wait = graph.probes[tid]?.wait,
                let found = RecordedHolder.find(pid: pid, waiter: tid, wait: wait, threads: threadIDs)
            {
                recorded[tid] = found
            }
        }
        let ranking = DumpRanking(
            knownLoops: knownLoops, guessedLoops: guessedLoops, waitsFor: graph.waitsFor,
            recordedHolders: recorded.mapValues(\.threadID))
        let candidates = ranking.order(entries()).filter { $0.role == .candidateHolder }.map(\.entry.snapshot.threadId)
        if candidates.contains(where: { samples[$0] == nil }) {
            sampling.beginThreadSnapshot()
            capture(candidates)
            symbolicateNew()
        }

        let onCPU = Self.onCPUFor(pid: pid, firstLook: firstLook, stopSwitches: stopSwitches)
        var errors = sampling.setupError.map { [$0] } ?? []
        var threads: [ProcessDump.Thread] = []
        // The stack of another process's thread behind a blocked thread's wait, once per process.
        var peerStacks: [Int32: PeerStack?] = [:]
        func withPeerStack(_ process: StallReport.Cause.BlockingProcess?) -> StallReport.Cause.BlockingProcess? {
            guard var process else { return nil }
            if peerStacks[process.processId] == nil {
                let (peer, error) = PeerStack.capture(
                    processID: process.processId, threadID: process.threadId, configuration: limits
                ) { PtraceStackSampling(processID: $0, captureTimeoutNanos: configuration.intervals.captureTimeout) }
                if let error { errors.append(error) }
                peerStacks[process.processId] = .some(peer)
            }
            if let peer = peerStacks[process.processId] ?? nil {
                process.threadId = peer.threadID
                process.frames = peer.frames
            }
            return process
        }
        for (entry, role, candidates) in ranking.order(entries()) {
            let tid = entry.snapshot.threadId
            guard let probe = graph.probes[tid] else { continue }
            var snapshot = entry.snapshot
            if let sample = samples[tid],
                let error = sample.error ?? (snapshot.frames.isEmpty ? "stack not captured" : nil)
            {
                snapshot.error = error
                errors.append("thread \(tid): \(error)")
            }
            threads.append(
                ProcessDump.Thread(
                    snapshot: snapshot, role: role, stateDescription: probe.stateDescription,
                    waitTarget: probe.wait?.targetDescription,
                    pauseMicros: samples[tid]?.pauseNanos.map { Double($0) / 1000 }, activity: entry.activity,
                    blockedForAtLeastMs: entry.blockedForNanos.map { StallReport.milliseconds($0) },
                    onCPUForAtLeastMs: onCPU[tid].map { StallReport.milliseconds($0) },
                    candidateHolderIds: candidates.isEmpty ? nil : candidates,
                    recordedHolderId: recorded[tid]?.threadID,
                    recordedHolderEvidence: recorded[tid]?.how,
                    blockingProcess: entry.activity == .blocked
                        ? withPeerStack(probe.wait.flatMap { .behind($0, pid: pid) }) : nil))
        }
        let allFrames = threads.flatMap(\.snapshot.frames)
        var images = symbolicator.images(for: allFrames)
        if let main = symbolicator.executableImage(), !images.contains(where: { $0.path == main.path }) {
            images.insert(main, at: 0)
        }
        return ProcessDump(
            takenAt: Date(), process: ProcessIdentity.of(pid: pid), threadCount: graph.probes.count,
            loopThreadIds: knownLoops.isEmpty ? guessedLoops : knownLoops, loopThreadsGuessed: knownLoops.isEmpty,
            threads: threads, deadlockThreadIds: DumpRanking.cycle(in: graph.waitsFor), images: images,
            errors: errors + symbolicator.errors)
    }

    /// How long each thread of `firstLook` has been busy at least: the time since that look, when it is still
    /// running or runnable and made no voluntary context switch since — it blocked on nothing, slept on nothing —
    /// but those counted across the dump's own stops of it (`stopSwitches`: a traced stop is one or two, read
    /// around each capture). A thread with any other is left out.
    static func onCPUFor(pid: Int32, firstLook: [Int32: (switches: UInt64, at: UInt64)], stopSwitches: [Int32: UInt64])
        -> [Int32: UInt64]
    {
        var result: [Int32: UInt64] = [:]
        for (tid, first) in firstLook {
            let directory = ProcDirectory(processID: pid, threadID: tid)
            guard let status = directory.status(), status["State"]?.hasPrefix("R") == true,
                let switches = status.voluntarySwitches, switches >= first.switches
            else { continue }
            let now = sw_monotonic_ns()
            if switches - first.switches <= stopSwitches[tid] ?? 0, now > first.at { result[tid] = now - first.at }
        }
        return result
    }

    /// The loop threads: those named by `--tid` and `--threads`, and those the process's valid heartbeat
    /// segments name; when there are none, the dump guesses them (``DumpRanking/guessedLoops(_:mainThread:)``).
    func loopThreads() -> [Int32] {
        var found = Set(loopThreadIDs)
        let executable = ProcessIdentity.of(pid: processID).executable
        let rules = threadRules.filter { $0.applies(toExecutable: executable) }
        found.formUnion(LoopThreadRule.matchingThreads(of: processID, rules: rules).keys)
        for file in HeartbeatReader.segmentFiles(in: heartbeatDirectory) where file.pid == processID {
            guard let reader = try? HeartbeatReader(path: file.path, expectedPID: processID) else { continue }
            found.insert(reader.segment.loopThreadID == 0 ? processID : reader.segment.loopThreadID)
        }
        return found.sorted()
    }

    /// `loops`, each followed by the owner chain of the lock it waits for (a deadlock's cycle ends the chain).
    static func ownerChains(of loops: [Int32], in graph: ThreadWaitGraph) -> [Int32] {
        var order: [Int32] = []
        for loop in loops {
            var current = loop
            while !order.contains(current) {
                order.append(current)
                guard let next = graph.waitsFor[current] else { break }
                current = next
            }
        }
        return order
    }

    /// Refuses, with a reason a user can act on, a process that cannot be dumped.
    static func checkTraceable(_ pid: Int32) throws(SidecarError) {
        let process = ProcDirectory(processID: pid)
        guard pid > 0, kill(pid, 0) == 0 || errno == EPERM, let status = process.status() else {
            throw SidecarError.noSuchProcess(pid: pid)
        }
        if pid == getpid() {
            throw SidecarError(.notTraceable, "cannot dump process \(pid): a process cannot trace itself")
        }
        let state = status["State"] ?? ""
        if state.hasPrefix("Z") || state.hasPrefix("X") {
            throw SidecarError(
                .notTraceable, "cannot dump process \(pid): it has exited and is a zombie (\(state))",
                context: ["pid": String(pid)])
        }
        if process.thread(pid).refusesPtraceReads {
            throw SidecarError.permissionDenied(pid: pid, doing: "reading /proc/\(pid)/task/\(pid)/syscall")
        }
        if process.text("maps")?.isEmpty ?? true {
            throw SidecarError(
                .notTraceable, "cannot dump process \(pid): it is a kernel thread (no user-space memory)",
                context: ["pid": String(pid)])
        }
        if let tracer = status.tracerProcessID, tracer != 0 {
            let name = ProcDirectory(processID: tracer).comm()?.trimmingCharacters(in: .whitespacesAndNewlines)
            throw SidecarError(
                .notTraceable,
                "cannot dump process \(pid): process \(tracer)\(name.map { " (\($0))" } ?? "") is tracing it "
                    + "(a debugger?), and a process has one tracer at a time",
                context: ["pid": String(pid), "tracerPid": String(tracer)])
        }
    }
}
