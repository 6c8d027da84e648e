// CandidateHolders: who may hold a lock that keeps no owner (a semaphore, a runtime's own mutex), said as such.

extension CauseClassifier {
    /// Threads that may hold the lock the loop waits on when the lock records no owner (POSIX semaphores such as
    /// CPython's `threading.Lock`, condition variables, runtimes' own monitors): never a certainty, only the
    /// threads whose state allows it, most likely first.
    ///
    /// Left out: the loop, threads waiting on the same word (fellow waiters), and threads idling in an event wait
    /// (an idle pool cannot be in the middle of a critical section). Ranked: threads blocked on another lock (the
    /// other half of a possible deadlock), then threads running or sleeping (holding it while they work or wait),
    /// then the rest. At most `limit`.
    static func candidateHolders(
        _ e: Evidence, loopWaitAddress: UInt64?, limit: Int = 3
    ) -> [StallReport.ThreadSnapshot] {
        func rank(_ t: StallReport.ThreadSnapshot) -> Int? {
            guard t.threadId != e.loopThreadID else { return nil }
            if let address = loopWaitAddress, t.waitAddress == address { return nil }
            let kind = t.syscall.flatMap(SyscallTable.number(named:)).map(SyscallTable.kind)
            switch kind {
            case .idleWait?: return nil
            case .lock?: return 0
            case .sleep?, nil: return t.state == "R" || kind == .sleep ? 1 : 2
            default: return 2
            }
        }
        let ranked = e.threads.compactMap { t in rank(t).map { (t, $0) } }
        return ranked.sorted { ($0.1, $0.0.threadId) < ($1.1, $1.0.threadId) }.prefix(limit).map(\.0)
    }

    /// One evidence sentence naming the candidates, or nil when there are none.
    static func candidateSentence(_ candidates: [StallReport.ThreadSnapshot]) -> String? {
        guard !candidates.isEmpty else { return nil }
        let named = candidates.map { t in
            let doing = t.syscall.map { "in \($0)" } ?? "running"
            return "thread \(t.threadId) (\(t.name), \(t.stateDescription), \(doing))"
        }
        return "candidate holders, not certain (the lock keeps no owner): " + named.joined(separator: "; ")
    }
}

extension SyscallTable {
    /// The number of the system call called `name`, or nil.
    static func number(named name: String) -> Int? { byNameTable[name] }

    private static let byNameTable: [String: Int] = Dictionary(
        names.map { ($1, $0) }, uniquingKeysWith: { a, _ in a })
}
