// CaptureLedger: every stop of a thread of this process by StallWatch's in-process samplers, for the other watchers.
import Synchronization

/// Which threads of this process StallWatch's in-process samplers stopped or signalled (the ptrace helper's stops,
/// the sampling signal), and whether a capture of each is under way.
///
/// A watcher that judges a thread by its /proc counters (the thread watchdog's ``ProcProgressProbe``) discounts
/// the counter moves of its own captures; a capture by any other watcher of the process — the all-thread snapshot
/// of a stall elsewhere, by another watchdog or by the same watching thread for another thread it follows — moves
/// the same counters (a blocked read restarted: one more read call, two more voluntary switches) and is no more the
/// thread's progress. The probe reads this ledger at each look: the captures finished since the look before, less
/// those it took itself, are discounted like its own, and a look while one is under way (the thread may be stopped
/// at that moment) keeps the verdict of the look before.
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

    private static let entries = Mutex<[Int32: Entry]>([:])
    static let maxThreads = 4096

    /// Runs `body`, a capture that stops or signals thread `threadID` of this process, recorded as under way while
    /// it runs and then as finished.
    package static func capturing<Result>(_ threadID: Int32, _ body: () -> Result) -> Result {
        entries.withLock { entries in
            if entries[threadID] == nil, entries.count >= maxThreads {
                entries = entries.filter { $0.value.underWay > 0 }
            }
            entries[threadID, default: Entry()].underWay += 1
        }
        defer {
            entries.withLock { entries in
                var entry = entries[threadID] ?? Entry()
                entry.underWay = max(0, entry.underWay - 1)
                entry.finished += 1
                entries[threadID] = entry
            }
        }
        return body()
    }

    /// Thread `threadID`'s captures so far.
    package static func entry(_ threadID: Int32) -> Entry {
        entries.withLock { $0[threadID] ?? Entry() }
    }
}
