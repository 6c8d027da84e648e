// The stack of another process's thread that a stall's loop waits on: where in its code it holds the loop up.

extension EvidenceCollector {
    /// The other process a sample found behind the wait, and its thread when one can be told: a file lock's holder,
    /// the recorded owner of a process-shared lock, a SysV semaphore's last operator, the other end of a pipe or
    /// socket.
    static func peer(behind sample: StallEvidence.Sample) -> (processID: Int32, threadID: Int32?)? {
        if let holder = sample.fileLockHolder { return (holder.processID, nil) }
        guard let found = sample.sharedLock?.owner ?? sample.otherProcess, let pid = found.processID else { return nil }
        return (pid, found.threadID)
    }

    /// Captures, once per process and stall, the stack of the thread of another process behind `sample`'s wait
    /// (its only thread when none is named), with the target's ``StallRecorder/Target/peerSampler``; symbolicated
    /// at once, names only, for the process may be gone when the report is written. A capture that fails says
    /// why in the report's `capture.errors`.
    mutating func capturePeer(behind sample: StallEvidence.Sample, into evidence: inout StallEvidence) {
        guard let makeSampler = target.peerSampler, let (processID, named) = Self.peer(behind: sample),
            processID != pid, !peersTried.contains(processID)
        else { return }
        peersTried.insert(processID)
        let (peer, error) = PeerStack.capture(
            processID: processID, threadID: named, configuration: configuration, sampler: makeSampler)
        if let error { evidence.captureErrors.append(error) }
        evidence.peerStack = peer
    }
}

extension PeerStack {
    /// Captures the stack of thread `threadID` of process `processID` (its only thread when nil) with a sampler
    /// `sampler` makes for it, symbolicated at once, names only: the process may be gone by the time a report is
    /// written. Nil, with the reason when there is one, when no thread can be told or the capture failed.
    package static func capture(
        processID: Int32, threadID: Int32?, configuration: StallWatchConfiguration,
        sampler: (Int32) -> (any StackSampling)?
    ) -> (PeerStack?, error: String?) {
        let threads = ThreadProbe.threadIDs(pid: processID)
        guard let threadID = threadID ?? (threads == [processID] ? processID : nil), threads.contains(threadID),
            let sampler = sampler(processID)
        else { return (nil, nil) }
        let taken = sampler.sampleThread(id: threadID, configuration: configuration)
        let error = taken.error.map { "the stack of thread \(threadID) of process \(processID): \($0)" }
        guard !taken.frames.isEmpty else { return (nil, error) }
        let symbolicator = Symbolicator(processID: processID, mode: configuration.symbolication == .off ? .off : .fast)
        let frames = symbolicator.symbolicate(Array(taken.frames.prefix(configuration.maxThreadFrames)))
        return (PeerStack(processID: processID, threadID: threadID, frames: frames), error)
    }
}
