// ThreadWaitGraph: who waits for whom among every thread of a process, and which threads matter most to a stall.

/// The wait-for edges of a process at one instant (thread → owner of the lock it waits for), read for every
/// thread from /proc and the lock words, with no stop, so a stack cap never hides the holder or the other half
/// of a deadlock.
package struct ThreadWaitGraph: Sendable {
    /// Every thread's probe, by thread id.
    package let probes: [Int32: ThreadProbe]
    /// Thread → the thread that owns the lock it waits for (only where the waiting code is a mutex).
    package let waitsFor: [Int32: Int32]

    package init(probes: [Int32: ThreadProbe], waitsFor: [Int32: Int32]) {
        self.probes = probes
        self.waitsFor = waitsFor
    }

    /// Reads every thread of `pid` (but `excluding`), calling `between` before each thread (a process of
    /// thousands of threads takes hundreds of milliseconds to read: the caller's periodic work goes on).
    package static func read(pid: Int32, excluding: Set<Int32> = [], between: () -> Void = {}) -> ThreadWaitGraph {
        let tids = ThreadProbe.threadIDs(pid: pid).filter { !excluding.contains($0) }
        let all = Set(tids)
        var probes: [Int32: ThreadProbe] = [:]
        var edges: [Int32: Int32] = [:]
        for tid in tids {
            between()
            guard let probe = ThreadProbe.read(pid: pid, tid: tid) else { continue }
            probes[tid] = probe
            if probe.syscallKind == .lock, let wait = probe.wait,
                let owner = LockOwner.owner(pid: pid, wait: wait, threads: all)?.threadID
            {
                edges[tid] = owner
            }
        }
        return ThreadWaitGraph(probes: probes, waitsFor: edges)
    }

    /// The threads in order of relevance to a stall of `loop`: the loop; the owner chain of what it waits for;
    /// threads waiting for the loop or anyone in that chain; threads waiting for those; then the rest by id.
    package func relevanceOrder(loop: Int32?) -> [Int32] {
        var order: [Int32] = []
        var seen = Set<Int32>()
        func add(_ tid: Int32) {
            guard probes[tid] != nil, seen.insert(tid).inserted else { return }
            order.append(tid)
        }
        if let loop {
            add(loop)
            var current = loop
            while let next = waitsFor[current], !seen.contains(next) {
                add(next)
                current = next
            }
            // Waiters on what the threads found so far hold, breadth first.
            var frontier = order
            while !frontier.isEmpty {
                let holders = Set(frontier)
                let waiters = waitsFor.filter { holders.contains($0.value) && !seen.contains($0.key) }.keys.sorted()
                waiters.forEach(add)
                frontier = waiters
            }
        }
        // Then any thread in a lock wait (part of some other chain), then the rest.
        waitsFor.keys.sorted().forEach(add)
        probes.keys.sorted().forEach(add)
        return order
    }
}
