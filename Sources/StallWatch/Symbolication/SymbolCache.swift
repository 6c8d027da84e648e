// SymbolCache: the process-wide, bounded cache of image symbols keyed by build-id, shared by every symbolicator.
import Synchronization

/// Keeps one ``ImageSymbols`` per ELF file for the life of the process, so a file's symbol table and DWARF are
/// read once, not once per stall, per report stage or per watched process: the daemon watching ten instances of
/// one service, or one service's successive stalls, all share the same entries.
///
/// Entries are keyed by what the file is, not where it is (``Key``): a rebuilt binary installed at the same path
/// has a new build-id, gets a new entry, and is never answered from the old one, while an old instance still
/// running keeps getting its own binary's names. At most `capacity` images are kept; past it the least recently
/// used one is dropped (symbolicators still holding it keep it alive until they let go). Thread-safe.
package final class SymbolCache: Sendable {
    /// The cache every ``Symbolicator`` uses unless given another.
    package static let shared = SymbolCache()

    /// What a file is: its GNU build-id and size, or for a file without one, where it is and when it was written.
    package enum Key: Hashable, Sendable {
        case buildID(String, size: Int64)
        case file(device: UInt64, inode: UInt64, size: Int64, modifiedNanos: Int64)
    }

    /// Counts since the cache was created, for tests, benchmarks and debugging.
    package struct Statistics: Sendable, Equatable {
        /// Image files opened (libdwfl sessions created).
        package var imagesOpened = 0
        /// Requests for an image already in the cache.
        package var imagesReused = 0
        /// Names and lines answered from an image's table.
        package var hits = 0
        /// Names and lines looked up in libdwfl.
        package var misses = 0
        /// Images dropped to stay within the capacity.
        var evictions = 0
        /// Images held now (including files libdwfl could not read, remembered so they are not retried).
        var resident = 0
    }

    /// Shared with the entries, which count their own hits and misses.
    final class Counters: Sendable {
        let imagesOpened = Atomic<Int>(0)
        let imagesReused = Atomic<Int>(0)
        let hits = Atomic<Int>(0)
        let misses = Atomic<Int>(0)
        let evictions = Atomic<Int>(0)
        /// Tables (names or lines) whose first lookup has run: what a lookup that must not wait can newly answer.
        let tablesLoaded = Atomic<Int>(0)
    }

    private struct Entry {
        var symbols: ImageSymbols?
        var lastUse: UInt64
    }

    private struct State {
        var entries: [Key: Entry] = [:]
        var uses: UInt64 = 0
    }

    /// The most images kept at once.
    package let capacity: Int
    private let counters = Counters()
    private let state = Mutex(State())

    /// A cache of at most `capacity` images (a Swift service maps 20–40).
    package init(capacity: Int = 64) {
        self.capacity = max(1, capacity)
    }

    package var statistics: Statistics {
        var statistics = Statistics(
            imagesOpened: counters.imagesOpened.load(ordering: .relaxed),
            imagesReused: counters.imagesReused.load(ordering: .relaxed),
            hits: counters.hits.load(ordering: .relaxed), misses: counters.misses.load(ordering: .relaxed),
            evictions: counters.evictions.load(ordering: .relaxed))
        statistics.resident = state.withLock { $0.entries.count }
        return statistics
    }

    /// The entry for the file `identity` checked, opened on first use; nil when libdwfl cannot read it.
    /// The symbols of the ELF file at `path` (a binary or a separate debug file, not a process's image), shared
    /// like any image's; nil when the file cannot be opened or libdwfl cannot read it.
    package func symbols(ofFile path: String) -> ImageSymbols? {
        ImageIdentity(file: path).flatMap(symbols(for:))
    }

    /// The entry for `identity` if one was opened already, without opening the file: `.some(nil)` for a file
    /// libdwfl could not read, nil when there is no entry yet.
    func existingSymbols(for identity: ImageIdentity) -> ImageSymbols?? { existingSymbols(forKey: identity.key) }

    /// ``existingSymbols(for:)`` by the key of an identity checked before.
    func existingSymbols(forKey key: Key) -> ImageSymbols?? {
        state.withLock { state -> ImageSymbols?? in
            guard var entry = state.entries[key] else { return nil }
            state.uses += 1
            entry.lastUse = state.uses
            state.entries[key] = entry
            return .some(entry.symbols)
        }
    }

    func symbols(for identity: ImageIdentity) -> ImageSymbols? {
        let key = identity.key
        let cached: Entry? = state.withLock { state in
            guard var entry = state.entries[key] else { return nil }
            state.uses += 1
            entry.lastUse = state.uses
            state.entries[key] = entry
            return entry
        }
        if let cached {
            counters.imagesReused.add(1, ordering: .relaxed)
            return cached.symbols
        }
        // Opened outside the lock: other images' lookups must not wait for this file's ELF headers.
        let opened = ImageSymbols(identity: identity, counters: counters)
        return state.withLock { state in
            state.uses += 1
            // Another thread opened the same file meanwhile: keep one entry (the loser's sessions close here).
            if let raced = state.entries[key] {
                state.entries[key]?.lastUse = state.uses
                return raced.symbols
            }
            state.entries[key] = Entry(symbols: opened, lastUse: state.uses)
            counters.tablesLoaded.add(1, ordering: .releasing)
            while state.entries.count > capacity {
                guard let oldest = state.entries.min(by: { $0.value.lastUse < $1.value.lastUse })?.key else { break }
                state.entries[oldest] = nil
                counters.evictions.add(1, ordering: .relaxed)
            }
            return opened
        }
    }

    /// Changes whenever an entry is opened or one of its tables loads: a frame a lookup that must not wait left
    /// without a name or a line may have one once it changed.
    var generation: Int { counters.tablesLoaded.load(ordering: .acquiring) }

    /// Drops every entry (symbolicators holding one keep it until they let go).
    package func removeAll() {
        state.withLock { $0.entries.removeAll() }
    }
}
