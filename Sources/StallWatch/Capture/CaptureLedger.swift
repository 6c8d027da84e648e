// CaptureLedger: every stop of a thread by this process's captures, for the other watchers of the same thread.
import CStallWatchCore
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Which threads this process's captures stopped or signalled — its own threads by the in-process samplers (the
/// ptrace helper, the sampling signal), another process's by the sidecar's ptrace sampler — and whether a capture of
/// each is under way.
///
/// A watcher that judges a thread by its /proc counters (``ProcProgressProbe``) discounts the counter moves of its
/// own captures; a capture by any other watcher in this process — the all-thread snapshot of a stall of another
/// loop, by another watchdog, by another thread of the sidecar, or by the same watching thread for another thread it
/// follows — moves the same counters (a blocked read restarted: one more read call, two more voluntary switches)
/// and is no more the thread's progress. The probe reads this ledger at each look: the captures finished since the
/// look before, less those it took itself, are discounted like its own, and a look while one is under way (the
/// thread may be stopped at that moment) keeps the verdict of the look before. A look and a capture of one thread
/// never overlap: a capture waits for a look under way (its /proc reads, well under a millisecond; at most 10 ms),
/// so no look reads counters that a capture moved half-way; a look kept from a CPU for longer (a loaded machine) is
/// told at its end that a capture began under it, and its reads are discarded. Captures by other processes (another
/// sidecar, the target's own embedded watchdog) are not seen here.
///
/// Bounded: past 4096 threads, the entries with no capture under way are dropped (a probe that then reads fewer
/// captures than it saw before discounts none at that look).
package enum CaptureLedger {
    /// One thread's captures.
    package struct Entry: Sendable, Equatable {
        /// Captures of the thread running now.
        package var underWay = 0
        /// Captures of the thread finished so far.
        package var finished: UInt64 = 0
        /// Looks at the thread's /proc files under way.
        package var looking = 0
        /// Captures of the thread begun so far: a look that sees this move between its begin and its end overlapped
        /// one.
        package var begun: UInt64 = 0
    }

    private struct Key: Hashable {
        var processID: Int32
        var threadID: Int32
    }

    /// The entries, in shards by thread so that watchers of different threads seldom meet on one lock (a look that
    /// waited for it would be one more voluntary switch of the watching thread).
    private final class Shard: Sendable {
        let entries = Mutex<[Key: Entry]>([:])
    }

    private static let shards = (0..<64).map { _ in Shard() }
    static let maxThreads = 4096

    private static func shard(_ key: Key) -> Shard {
        shards[Int(UInt32(bitPattern: key.threadID ^ key.processID &* 31) % UInt32(shards.count))]
    }

    /// Runs `body`, a capture that stops or signals thread `threadID` of process `processID`, recorded as under way
    /// while it runs and then as finished.
    package static func capturing<Result>(processID: Int32, threadID: Int32, _ body: () -> Result) -> Result {
        let key = Key(processID: processID, threadID: threadID)
        let lookDeadline = sw_monotonic_ns() &+ maxLookWaitNanos
        while true {
            let started = shard(key).entries.withLock { entries in
                if let entry = entries[key], entry.looking > 0, sw_monotonic_ns() < lookDeadline { return false }
                if entries[key] == nil, entries.count >= maxThreads / shards.count {
                    entries = entries.filter { $0.value.underWay > 0 || $0.value.looking > 0 }
                }
                entries[key, default: Entry()].underWay += 1
                entries[key, default: Entry()].begun += 1
                return true
            }
            if started { break }
            usleep(50)
        }
        defer {
            shard(key).entries.withLock { entries in
                var entry = entries[key] ?? Entry()
                entry.underWay = max(0, entry.underWay - 1)
                entry.finished += 1
                entries[key] = entry
            }
        }
        return body()
    }

    /// The longest a capture waits for a look at its thread to end.
    static let maxLookWaitNanos: UInt64 = 10_000_000

    /// A look at thread `threadID` of process `processID` begins: its captures so far, or nil while one is under way
    /// (no look then). Each non-nil answer is followed by ``endLook(processID:threadID:)`` once the look's /proc
    /// reads are done; until then captures of the thread wait.
    package static func beginLook(processID: Int32, threadID: Int32) -> Entry? {
        let key = Key(processID: processID, threadID: threadID)
        return shard(key).entries.withLock { entries in
            if let entry = entries[key], entry.underWay > 0 { return nil }
            if entries[key] == nil, entries.count >= maxThreads / shards.count {
                entries = entries.filter { $0.value.underWay > 0 || $0.value.looking > 0 }
            }
            entries[key, default: Entry()].looking += 1
            return entries[key]
        }
    }

    /// How many captures of thread `threadID` of process `processID` have finished so far (0 if none was recorded,
    /// or its entry was dropped past the bound).
    package static func finishedCaptures(processID: Int32, threadID: Int32) -> UInt64 {
        let key = Key(processID: processID, threadID: threadID)
        return shard(key).entries.withLock { $0[key]?.finished ?? 0 }
    }

    /// The look begun by ``beginLook(processID:threadID:)``, which answered `begun`, is done. True when a capture of
    /// the thread began while it ran (one that waited its 10 ms for the look and went ahead): the look's reads may
    /// straddle the stop, and are not to be judged.
    @discardableResult
    package static func endLook(processID: Int32, threadID: Int32, begun: Entry) -> Bool {
        let key = Key(processID: processID, threadID: threadID)
        return shard(key).entries.withLock { entries in
            guard let entry = entries[key] else { return true }
            if entry.looking > 0 { entries[key]!.looking -= 1 }
            return entry.begun != begun.begun
        }
    }

}
