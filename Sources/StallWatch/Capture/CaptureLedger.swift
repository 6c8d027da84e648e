// CaptureLedger: every stop of a thread by this process's captures, for the other watchers of the same thread.
import Synchronization

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
/// thread may be stopped at that moment) keeps the verdict of the look before. Captures by other processes (another
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
    }

    private struct Key: Hashable {
        var processID: Int32
        var threadID: Int32
    }

    private static let entries = Mutex<[Key: Entry]>([:])
    static let maxThreads = 4096

    /// Runs `body`, a capture that stops or signals thread `threadID` of process `processID`, recorded as under way
    /// while it runs and then as finished.
    package static func capturing<Result>(processID: Int32, threadID: Int32, _ body: () -> Result) -> Result {
        let key = Key(processID: processID, threadID: threadID)
        entries.withLock { entries in
            if entries[key] == nil, entries.count >= maxThreads {
                entries = entries.filter { $0.value.underWay > 0 }
            }
            entries[key, default: Entry()].underWay += 1
        }
        defer {
            entries.withLock { entries in
                var entry = entries[key] ?? Entry()
                entry.underWay = max(0, entry.underWay - 1)
                entry.finished += 1
                entries[key] = entry
            }
        }
        return body()
    }

    /// Thread `threadID` of process `processID`: its captures by this process so far.
    package static func entry(processID: Int32, threadID: Int32) -> Entry {
        entries.withLock { $0[Key(processID: processID, threadID: threadID)] ?? Entry() }
    }
}
