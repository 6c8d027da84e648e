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
        candidateHolders(e.threads, waiter: e.loopThreadID, waitAddress: loopWaitAddress, limit: limit)
    }

    /// The candidate holders of the lock `waiter` waits for (at `waitAddress`), ranked as above.
    package static func candidateHolders(
        _ threads: [StallReport.ThreadSnapshot], waiter: Int32, waitAddress: UInt64?, limit: Int = 3
    ) -> [StallReport.ThreadSnapshot] {
        func rank(_ t: StallReport.ThreadSnapshot) -> Int? {
            guard t.threadId != waiter else { return nil }
            if let address = waitAddress, t.waitAddress == address { return nil }
            let kind = t.syscall.flatMap(SyscallTable.number(named:)).map(SyscallTable.kind)
            switch kind {
            case .idleWait?: return nil
            case .lock?: return 0
            case .sleep?, nil: return t.state == "R" || kind == .sleep ? 1 : 2
            default: return 2
            }
        }
        let ranked = threads.compactMap { t in rank(t).map { (t, $0) } }
        return ranked.sorted { ($0.1, $0.0.threadId) < ($1.1, $1.0.threadId) }.prefix(limit).map(\.0)
    }

    /// A likely deadlock among locks that record no owner: exactly one other thread is blocked on a lock (the
    /// only thread that could be the other half), at another address, on a lock that records no owner either, and
    /// the loop is the only thread blocked on a lock among that lock's candidates — each waits for a lock the
    /// other may hold. With a third thread blocked on a lock, who holds what is ambiguous and no cycle is claimed.
    /// Returns that other thread, or nil.
    static func likelyCycle(_ e: Evidence, loopWaitAddress: UInt64?) -> StallReport.ThreadSnapshot? {
        func lockBlocked(_ waiter: Int32, _ address: UInt64) -> [StallReport.ThreadSnapshot] {
            candidateHolders(e.threads, waiter: waiter, waitAddress: address, limit: Int.max).filter {
                $0.syscall.flatMap(SyscallTable.number(named:)).map(SyscallTable.kind) == .lock
            }
        }
        guard let loopWaitAddress, e.threads.contains(where: { $0.threadId == e.loopThreadID }) else { return nil }
        let others = lockBlocked(e.loopThreadID, loopWaitAddress)
        guard others.count == 1, let other = others.first, let otherAddress = other.waitAddress,
            otherAddress != loopWaitAddress, other.waitingForThreadId == nil,
            lockBlocked(other.threadId, otherAddress).map(\.threadId) == [e.loopThreadID]
        else { return nil }
        return other
    }

    /// The candidates as report data: `likely` for the thread of a likely cycle, `possible` for the others, each
    /// with the state that makes it one.
    static func holderData(
        _ candidates: [StallReport.ThreadSnapshot], likely: Int32? = nil
    ) -> [StallReport.Cause.CandidateHolder]? {
        guard !candidates.isEmpty else { return nil }
        return candidates.map { t in
            let kind = t.syscall.flatMap(SyscallTable.number(named:)).map(SyscallTable.kind)
            let reason: String
            switch kind {
            case .lock?:
                reason =
                    "blocked on another lock (\(t.syscall ?? "futex"))"
                    + (t.threadId == likely
                        ? ", for which the loop thread is in turn the best candidate" : "")
            case .sleep?: reason = "sleeping (\(t.syscall ?? "sleep")): it may sleep while holding the lock"
            case nil:
                reason =
                    t.state == "R"
                    ? "running: it may be working while holding the lock" : "in state \(t.state), in user space"
            default: reason = "\(t.stateDescription) in \(t.syscall ?? "a system call")"
            }
            return .init(
                threadId: t.threadId, name: t.name, reason: reason,
                confidence: t.threadId == likely ? .likely : .possible)
        }
    }

    /// A lock that keeps no owner in its word but records one in a structure of its own, or whose last taker the
    /// process's lock book records (``RecordedHolder``): that thread is the likely holder, named first; the other
    /// candidates follow as possible ones.
    static func recordedHolderCause(
        _ recorded: RecordedHolder.Finding, _ e: Evidence, candidates: [StallReport.ThreadSnapshot],
        evidence: [String]
    ) -> StallReport.Cause {
        let thread = e.threads.first { $0.threadId == recorded.threadID }
        let name = thread?.name ?? ""
        let doing = thread.map { t in ", \(t.stateDescription)" + (t.syscall.map { " in \($0)" } ?? "") } ?? ""
        let sentence =
            "\(recorded.recorder) records thread \(recorded.threadID)" + (name.isEmpty ? "" : " (\(name))")
            + " as holding it: \(recorded.how); likely the holder, not certain\(doing)"
        let holder = StallReport.Cause.CandidateHolder(
            threadId: recorded.threadID, name: name, reason: "recorded by \(recorded.recorder): \(recorded.how)",
            confidence: .likely)
        let others = holderData(Array(candidates.filter { $0.threadId != recorded.threadID }.prefix(2))) ?? []
        if let cycle = mostCommon(e.observations.compactMap(\.recordedCycle)), cycle.count > 1 {
            // Each thread past the loop waits for a lock held (recorded) by the next; the last, by the loop.
            let holders = cycle.dropFirst(2).map { "thread \($0)" } + ["the loop thread"]
            let links = zip(cycle.dropFirst(), holders).map {
                "thread \($0) waits for a lock recorded as held by \($1)"
            }
            return .init(
                kind: .deadlock,
                evidence: evidence + [sentence, links.joined(separator: ", ") + ": likely a deadlock"],
                deadlockedThreadIds: cycle, deadlockCertainty: .likely, candidateHolders: [holder] + others)
        }
        return .init(kind: .lock, evidence: evidence + [sentence], candidateHolders: [holder] + others)
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
