// ProcessDumper: the stacks of a live process now (`stallwatch dump`), one thread stopped at a time.
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
    /// Every thread, not only the loop threads and the owners of the locks they wait for.
    package var allThreads: Bool
    /// Frames, stack bytes, capture timeout and symbolication mode.
    package var configuration: StallWatchConfiguration
    /// Where heartbeat segments name the process's loop threads.
    package var heartbeatDirectory: String

    package init(
        processID: Int32, allThreads: Bool = false, configuration: StallWatchConfiguration = .init(),
        heartbeatDirectory: String? = nil
    ) {
        self.processID = processID
        self.allThreads = allThreads
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
        let loops = loopThreads()
        let graph = ThreadWaitGraph.read(pid: pid)
        let chosen = allThreads ? graph.relevanceOrder(loop: loops.first) : Self.ownerChains(of: loops, in: graph)
        let owners = Set(Self.ownerChains(of: loops, in: graph)).subtracting(loops)

        let sampling = PtraceStackSampling(processID: pid, captureTimeoutNanos: configuration.intervals.captureTimeout)
        var limits = configuration
        limits.maxThreadFrames = configuration.maxFrames
        sampling.beginThreadSnapshot()
        var taken: [(tid: Int32, sample: StackSample)] = []
        for tid in chosen where graph.probes[tid] != nil {
            taken.append((tid, sampling.sampleThread(id: tid, configuration: limits)))
        }

        // Every thread runs again: now the slow part.
        let symbolicator = Symbolicator(processID: pid, mode: configuration.symbolication)
        var errors = sampling.setupError.map { [$0] } ?? []
        var threads: [ProcessDump.Thread] = []
        var allFrames: [StackFrame] = []
        for (tid, sample) in taken {
            guard let probe = graph.probes[tid] else { continue }
            var snapshot = StallReport.ThreadSnapshot(
                threadId: tid, name: probe.name, state: probe.state, wchan: probe.wchan, syscall: probe.syscallName)
            if probe.syscallKind == .lock, let address = probe.syscallArg0 {
                snapshot.waitAddress = address
                snapshot.waitingForThreadId = graph.waitsFor[tid]
            }
            snapshot.frames = symbolicator.symbolicate(sample.frames)
            allFrames += snapshot.frames
            if let error = sample.error ?? (snapshot.frames.isEmpty ? "stack not captured" : nil) {
                snapshot.error = error
                errors.append("thread \(tid): \(error)")
            }
            let role: ProcessDump.Thread.Role =
                loops.contains(tid) ? .loop : owners.contains(tid) ? .lockOwner : .other
            threads.append(
                ProcessDump.Thread(
                    snapshot: snapshot, role: role, stateDescription: probe.stateDescription,
                    waitTarget: probe.wait?.targetDescription,
                    pauseMicros: sample.pauseNanos.map { Double($0) / 1000 }))
        }
        var images = symbolicator.images(for: allFrames)
        if let main = symbolicator.executableImage(), !images.contains(where: { $0.path == main.path }) {
            images.insert(main, at: 0)
        }
        return ProcessDump(
            takenAt: Date(), process: ProcessIdentity.of(pid: pid), threadCount: graph.probes.count,
            loopThreadIds: loops, threads: threads, images: images, errors: errors + symbolicator.errors)
    }

    /// The threads that look like the process's loop: those its valid heartbeat segments name, else the main
    /// thread.
    func loopThreads() -> [Int32] {
        var found: [Int32] = []
        for file in HeartbeatReader.segmentFiles(in: heartbeatDirectory) where file.pid == processID {
            guard let reader = try? HeartbeatReader(path: file.path, expectedPID: processID) else { continue }
            let tid = reader.segment.loopThreadID == 0 ? processID : reader.segment.loopThreadID
            if !found.contains(tid) { found.append(tid) }
        }
        return found.isEmpty ? [processID] : found.sorted()
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
