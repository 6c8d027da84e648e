// OtherProcessCause: the verdict of a wait on another process — its semaphore, its end of a pipe or socket.

extension CauseClassifier {
    /// `io` with the process at the other end of the pipe, Unix socket or loopback TCP connection the loop waited on,
    /// when the samples found one (or the reason none could be named, as evidence).
    static func peerCause(_ e: Evidence, evidence: [String]) -> StallReport.Cause {
        var evidence = evidence
        let found = e.observations.compactMap(\.otherProcess).filter { $0.object != .semaphore }
        guard let other = mostCommon(found.filter { $0.processID != nil }) ?? mostCommon(found) else {
            return .init(kind: .io, evidence: evidence)
        }
        evidence.append(other.evidence)
        return .init(kind: .io, evidence: evidence, blockingProcess: blockingProcess(other))
    }

    /// `lock` for a wait on a SysV semaphore, with its last operator as the likely holder; nil when the loop did
    /// not wait on one.
    static func semaphoreCause(_ e: Evidence, total: Int, evidence: [String]) -> StallReport.Cause? {
        let found = e.observations.compactMap(\.otherProcess).filter { $0.object == .semaphore }
        guard let other = mostCommon(found.filter { $0.processID != nil }) ?? mostCommon(found) else { return nil }
        let call = mostCommon(e.observations.compactMap(\.syscall)).map(SyscallTable.name) ?? "semop"
        return .init(
            kind: .lock,
            evidence: evidence + [
                "\(found.count) of \(total) samples: waiting on a SysV semaphore in \(call)", other.evidence,
            ],
            blockingProcess: blockingProcess(other))
    }

    static func blockingProcess(_ found: OtherProcessWait) -> StallReport.Cause.BlockingProcess? {
        guard let pid = found.processID else { return nil }
        return .init(
            processId: pid, name: found.name, reason: found.reason, threadId: found.threadID, state: found.state)
    }
}

extension StallReport.Cause.BlockingProcess {
    /// The holder of a file lock, as a report's cause names it.
    static func fileLock(_ holder: FileLockHolder.Holder) -> Self {
        .init(
            processId: holder.processID, name: holder.name,
            reason: "holds the \(holder.lock) lock on the file the thread waits to lock ("
                + (holder.recordedProcessID == nil ? "/proc/locks" : "its descriptor's fdinfo") + ")")
    }

    /// Another process behind one thread's wait at one look, found the way a stall's samples find it: a file lock's
    /// holder (`/proc/locks`), a SysV semaphore's last operator, the owner a process-shared lock word names, or
    /// the other end of the pipe or socket it waits on (unless it waits on the process's own wake-ups only). Nil
    /// when the wait names no other process. Reads only the kernel's records: nothing is stopped.
    package static func behind(_ wait: ThreadWait, pid: Int32) -> Self? {
        guard let number = wait.number else { return nil }
        if number == 72 || number == 73 { return FileLockHolder.holder(pid: pid, wait: wait).map(fileLock) }
        let look = OtherProcessLook.read(pid: pid, wait: wait)
        return (look.sharedLock?.owner ?? look.otherProcess).flatMap(CauseClassifier.blockingProcess)
    }
}
