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
