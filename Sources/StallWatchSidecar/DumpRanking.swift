// DumpRanking: what each thread of a dumped process is doing, and the order `stallwatch dump` shows them in.
import StallWatch

/// Orders a process's threads by relevance for someone arriving mid-incident: a deadlock first, then the loops
/// (stuck ones before idle ones), the owners and candidate holders of what the stuck threads wait for, the other
/// stuck threads (longest blocked first), then the idle ones.
///
/// "Stuck" is judged from what the wait *is*, the same way for every runtime: running, uninterruptible sleep, a
/// lock wait (a recorded owner, or a stack inside a lock acquisition), I/O and sleeps are work; an event wait
/// (epoll, poll, select …) and a futex wait outside any lock acquisition (a condition variable: a pool waiting for
/// work) are idle.
struct DumpRanking {
    /// One thread as the ranking sees it.
    struct Entry {
        var snapshot: StallReport.ThreadSnapshot
        var activity: ProcessDump.Thread.Activity
        var blockedForNanos: UInt64?
    }

    /// The loop threads the user named or the process published (tried first, stuck or not).
    var knownLoops: [Int32]
    /// A guess at the loop (the main thread) when none is known: first only when it is stuck.
    var guessedLoop: Int32?
    /// Thread → owner of the lock it waits for.
    var waitsFor: [Int32: Int32]

    /// What a thread is doing from /proc alone; nil for a futex wait with no recorded owner, which its stack
    /// decides (``activity(ofOwnerlessFutexWaitWith:)``).
    static func activity(state: String, syscallKind: SyscallTable.Kind?, ownerKnown: Bool)
        -> ProcessDump.Thread.Activity?
    {
        if state.hasPrefix("R") { return .onCPU }
        if state.hasPrefix("D") || ownerKnown { return .blocked }
        switch syscallKind {
        case .io?, .sleep?: return .blocked
        case .lock?: return nil
        default: return .idle
        }
    }

    /// A futex wait with no recorded owner is a lock acquisition (blocked) when the stack's innermost frames are
    /// one — a mutex, a read-write lock, a semaphore, a runtime's lock — and a condition or event wait (idle)
    /// otherwise. Without a stack it counts as blocked: a lock is the costlier thing to overlook.
    static func activity(ofOwnerlessFutexWaitWith frames: [StackFrame]) -> ProcessDump.Thread.Activity {
        guard !frames.isEmpty else { return .blocked }
        for frame in frames.prefix(6) {
            let name = (frame.symbol ?? "").lowercased()
            if name.contains("cond_wait") || name.contains("cond_timedwait") || name.contains("cond_clockwait") {
                return .idle
            }
            if name.contains("lock") || name.contains("sem_wait") || name.contains("sem_timedwait")
                || name.contains("sem_clockwait") || name.contains("do_futex_wait")
            {
                return .blocked
            }
        }
        return .idle
    }

    /// The cycle of recorded owners among `waitsFor`, if any (each waits for a lock the next one holds).
    static func cycle(in waitsFor: [Int32: Int32]) -> [Int32]? {
        for start in waitsFor.keys.sorted() {
            var path: [Int32] = [start]
            var current = start
            while let next = waitsFor[current] {
                if let index = path.firstIndex(of: next) { return Array(path[index...]) }
                path.append(next)
                current = next
            }
        }
        return nil
    }

    /// The entries in order, each with its role and, for a stuck thread on a lock that records no owner, the
    /// candidate holders of that lock.
    func order(_ entries: [Entry]) -> [(entry: Entry, role: ProcessDump.Thread.Role, candidates: [Int32])] {
        let byID = Dictionary(entries.map { ($0.snapshot.threadId, $0) }) { a, _ in a }
        var out: [(entry: Entry, role: ProcessDump.Thread.Role)] = []
        var seen = Set<Int32>()
        let loops = Set(knownLoops + (guessedLoop.map { [$0] } ?? []))
        var owners = Set<Int32>()
        var candidates = Set<Int32>()
        var candidatesOf: [Int32: [Int32]] = [:]
        func role(_ tid: Int32) -> ProcessDump.Thread.Role {
            loops.contains(tid)
                ? .loop : owners.contains(tid) ? .lockOwner : candidates.contains(tid) ? .candidateHolder : .other
        }
        func add(_ tid: Int32) {
            guard let entry = byID[tid], seen.insert(tid).inserted else { return }
            out.append((entry, role(tid)))
        }
        func stuck(_ entry: Entry) -> Bool { entry.activity != .idle }
        func longestBlockedFirst(_ a: Entry, _ b: Entry) -> Bool {
            (a.blockedForNanos ?? 0, b.snapshot.threadId) > (b.blockedForNanos ?? 0, a.snapshot.threadId)
        }
        // A stuck thread, then the owner chain of what it waits for, or its candidate holders.
        func addWithHolders(_ entry: Entry) {
            add(entry.snapshot.threadId)
            var current = entry.snapshot.threadId
            var chain: Set<Int32> = [current]
            while let owner = waitsFor[current], chain.insert(owner).inserted {
                owners.insert(owner)
                add(owner)
                current = owner
            }
            let snapshot = entry.snapshot
            if waitsFor[snapshot.threadId] == nil, entry.activity == .blocked, snapshot.waitAddress != nil {
                let found = CauseClassifier.candidateHolders(
                    entries.map(\.snapshot), waiter: snapshot.threadId, waitAddress: snapshot.waitAddress)
                candidatesOf[snapshot.threadId] = found.map(\.threadId)
                for candidate in found {
                    candidates.insert(candidate.threadId)
                    add(candidate.threadId)
                }
            }
        }
        if let cycle = Self.cycle(in: waitsFor) {
            owners.formUnion(cycle)
            cycle.forEach(add)
        }
        let known = knownLoops.compactMap { byID[$0] }
        known.filter(stuck).sorted(by: longestBlockedFirst).forEach(addWithHolders)
        if let guessed = guessedLoop.flatMap({ byID[$0] }), stuck(guessed) { addWithHolders(guessed) }
        known.filter { !stuck($0) }.forEach { add($0.snapshot.threadId) }
        // Threads blocked on a lock before the rest: a holder shows up right after its waiter.
        let onLock = entries.filter { stuck($0) && $0.snapshot.waitAddress != nil }
        let others = entries.filter { stuck($0) && $0.snapshot.waitAddress == nil }
        onLock.sorted(by: longestBlockedFirst).forEach(addWithHolders)
        others.sorted(by: longestBlockedFirst).forEach(addWithHolders)
        entries.sorted { $0.snapshot.threadId < $1.snapshot.threadId }.forEach { add($0.snapshot.threadId) }
        // Roles learned after a thread was added (an owner found later) still apply.
        return out.map { item in
            let tid = item.entry.snapshot.threadId
            return (item.entry, role(tid), candidatesOf[tid] ?? [])
        }
    }
}
