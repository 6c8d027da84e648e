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
    /// Guesses at the loops when none is known (``guessedLoops(_:mainThread:)``): first only when stuck.
    var guessedLoops: [Int32]
    /// Thread → owner of the lock it waits for.
    var waitsFor: [Int32: Int32]
    /// Thread → the thread its lock's own structure records as holding it, where the word names no owner.
    var recordedHolders: [Int32: Int32] = [:]

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

    /// The loops of a process that nothing names (no `--tid`, `--threads` or heartbeat), guessed from what its
    /// threads do, the same way for every runtime:
    /// - every thread in a wait for events on descriptors (epoll, poll, select, io_uring): an event loop idles there;
    /// - a stuck thread numbered like one of those (`NIO-ELT-0-#0` beside an idle `NIO-ELT-0-#1`, `loop-3` beside
    ///   `loop-1`): a loop of the same group, caught away from its wait — unless an older thread has its very name,
    ///   for a thread takes the name of the thread that started it (a loop's helper, not a loop);
    /// - the main thread, unless it is idle outside an event wait (parked on a condition variable while other
    ///   threads serve, as a service's main thread does once its loops are started);
    /// - the main thread alone when nothing else qualifies.
    ///
    /// Older is judged by thread id (ids grow as threads are made, short of the counter wrapping). A guess: the view
    /// and the JSON say so.
    static func guessedLoops(_ entries: [Entry], mainThread: Int32) -> [Int32] {
        let inEventWait = entries.filter { entry in
            entry.activity == .idle && entry.snapshot.syscall.map(SyscallTable.isDescriptorEventWait) == true
        }
        var guessed = Set(inEventWait.map(\.snapshot.threadId))
        let stems = Set(inEventWait.compactMap { numberedStem($0.snapshot.name) })
        for entry in entries where entry.activity != .idle && !guessed.contains(entry.snapshot.threadId) {
            let snapshot = entry.snapshot
            guard let stem = numberedStem(snapshot.name), stems.contains(stem) else { continue }
            let inherited = entries.contains {
                $0.snapshot.threadId < snapshot.threadId && $0.snapshot.name == snapshot.name
            }
            if !inherited { guessed.insert(snapshot.threadId) }
        }
        let main = entries.first { $0.snapshot.threadId == mainThread }
        let mainIdleElsewhere = main.map { $0.activity == .idle && !guessed.contains(mainThread) } ?? true
        if !mainIdleElsewhere || guessed.isEmpty { guessed.insert(mainThread) }
        return guessed.sorted()
    }

    /// A thread name without its trailing number (`NIO-ELT-0-#` of `NIO-ELT-0-#1`), or nil when it ends in none.
    static func numberedStem(_ name: String) -> Substring? {
        let stem = name.reversed().drop { $0.isASCII && $0.isNumber }
        guard stem.count < name.count, !stem.isEmpty else { return nil }
        return name.prefix(stem.count)
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
        let loops = Set(knownLoops + guessedLoops)
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
                // The thread the lock's structure records comes first.
                let recorded = recordedHolders[snapshot.threadId].map { [$0] } ?? []
                let ids = recorded + found.map(\.threadId).filter { !recorded.contains($0) }
                candidatesOf[snapshot.threadId] = ids
                for candidate in ids {
                    candidates.insert(candidate)
                    add(candidate)
                }
            }
        }
        if let cycle = Self.cycle(in: waitsFor) {
            owners.formUnion(cycle)
            cycle.forEach(add)
        }
        let known = knownLoops.compactMap { byID[$0] }
        known.filter(stuck).sorted(by: longestBlockedFirst).forEach(addWithHolders)
        guessedLoops.compactMap { byID[$0] }.filter(stuck).sorted(by: longestBlockedFirst).forEach(addWithHolders)
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
