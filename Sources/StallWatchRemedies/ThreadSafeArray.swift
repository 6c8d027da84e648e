// An array shared between threads: concurrent reads, exclusive barrier writes, snapshot enumeration.
import Dispatch
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// An array that many threads may read and write at once, built on a concurrent queue with barrier writes.
///
/// - Reads run concurrently (`sync` on the concurrent queue); writes are exclusive (`sync(flags: .barrier)`).
/// - Index access cannot go out of range: ``subscript(safe:)`` and ``element(at:)`` return nil instead of
///   trapping, and ``remove(at:)`` / ``insert(_:at:)`` report whether the index was valid.
/// - Enumeration (``forEach(_:)``, ``first(where:)``, `for x in array`) works on a snapshot taken under one read,
///   so it is safe while other threads mutate, and always sees one consistent state.
/// - Callbacks never run while the queue is held, except the body of ``mutate(_:)``; calls back into the array
///   from that body run inline on the state being mutated instead of queueing behind themselves.
///
/// That last point is the non-reentrant-lock trap: a `sync` on the queue from inside a block already running on
/// it waits for itself forever (and a read issued from inside a read deadlocks as soon as a writer is waiting
/// between the two). This type never holds the queue while user code runs, except inside `mutate`, where it
/// recognises the re-entrant call by thread.
///
/// ```swift
/// let sessions = ThreadSafeArray<Session>()
/// sessions.append(session)                                    // any thread
/// sessions.forEach { s in if s.isStale { sessions.remove(where: { $0.id == s.id }) } }   // no deadlock
/// let top = sessions[safe: 0]                                 // nil when empty
/// ```
public final class ThreadSafeArray<Element: Sendable>: @unchecked Sendable {
    // @unchecked Sendable: the `var`s are read in `queue.sync` and written in barrier blocks only.
    // `storage` is read inside `queue.sync` and written inside barrier blocks only; `exclusiveOwner` and
    // `exclusiveStorage` describe the barrier block that is running user code (`mutate`), if any.
    private let queue: DispatchQueue
    private var storage: [Element]
    private let exclusiveOwner = Atomic<UInt>(0)
    private var exclusiveStorage: UnsafeMutablePointer<[Element]>?
    /// Counts writes; only touched with exclusive access.
    private var version: UInt64 = 0

    /// - Parameters:
    ///   - elements: The initial contents.
    ///   - label: The queue's label, seen in debuggers and stack reports.
    public init(_ elements: [Element] = [], label: String = "stallwatch.remedies.thread-safe-array") {
        storage = elements
        queue = DispatchQueue(label: label, attributes: .concurrent)
    }

    // MARK: The two primitives

    /// Runs `body` with shared (read) access. `body` is this type's own code, never a caller's closure.
    @inline(__always)
    private func read<R>(_ body: ([Element]) -> R) -> R {
        if isExclusiveOwner, let exclusiveStorage { return body(exclusiveStorage.pointee) }
        return queue.sync { body(storage) }
    }

    /// Runs `body` with exclusive access; inline when this thread already has it (inside ``mutate(_:)``).
    @inline(__always)
    private func write<R>(_ body: (inout [Element]) -> R) -> R {
        if isExclusiveOwner, let exclusiveStorage {
            version &+= 1
            return body(&exclusiveStorage.pointee)
        }
        return queue.sync(flags: .barrier) {
            version &+= 1
            return body(&storage)
        }
    }

    private var isExclusiveOwner: Bool {
        exclusiveOwner.load(ordering: .acquiring) == Self.currentThread
    }

    private static var currentThread: UInt { UInt(pthread_self()) }

    // MARK: Reading

    /// The number of elements.
    public var count: Int { read { $0.count } }

    public var isEmpty: Bool { read { $0.isEmpty } }

    /// A copy of the contents at one instant (copy-on-write: cheap until someone writes).
    public var snapshot: [Element] { read { $0 } }

    public var first: Element? { read { $0.first } }

    public var last: Element? { read { $0.last } }

    /// The element at `index`, or nil if `index` is out of range (now — another thread may change that).
    public func element(at index: Int) -> Element? {
        read { $0.indices.contains(index) ? $0[index] : nil }
    }

    /// The element at `index`, or nil when out of range. Setting an out-of-range index (or nil) does nothing.
    public subscript(safe index: Int) -> Element? {
        get { element(at: index) }
        set {
            guard let newValue else { return }
            write { array in
                if array.indices.contains(index) { array[index] = newValue }
            }
        }
    }

    // MARK: Enumerating (over a snapshot; callbacks may use the array freely)

    /// Calls `body` for each element of a snapshot. `body` may read and write this array.
    public func forEach(_ body: (Element) throws -> Void) rethrows {
        try snapshot.forEach(body)
    }

    /// The first element of a snapshot that satisfies `predicate`, which may read and write this array.
    public func first(where predicate: (Element) throws -> Bool) rethrows -> Element? {
        try snapshot.first(where: predicate)
    }

    /// Whether an element of a snapshot satisfies `predicate`.
    public func contains(where predicate: (Element) throws -> Bool) rethrows -> Bool {
        try snapshot.contains(where: predicate)
    }

    /// The elements of a snapshot that satisfy `isIncluded`.
    public func filter(_ isIncluded: (Element) throws -> Bool) rethrows -> [Element] {
        try snapshot.filter(isIncluded)
    }

    /// A snapshot, transformed.
    public func map<T>(_ transform: (Element) throws -> T) rethrows -> [T] {
        try snapshot.map(transform)
    }

    /// A snapshot, sorted.
    public func sorted(by areInIncreasingOrder: (Element, Element) throws -> Bool) rethrows -> [Element] {
        try snapshot.sorted(by: areInIncreasingOrder)
    }

    // MARK: Writing

    public func append(_ element: Element) {
        write { $0.append(element) }
    }

    public func append(contentsOf elements: some Sequence<Element> & Sendable) {
        write { $0.append(contentsOf: elements) }
    }

    /// Inserts `element` at `index`; returns false (and inserts nothing) if `index` is not in `0...count`.
    @discardableResult
    public func insert(_ element: Element, at index: Int) -> Bool {
        write { array in
            guard (0...array.count).contains(index) else { return false }
            array.insert(element, at: index)
            return true
        }
    }

    /// Removes and returns the element at `index`, or returns nil if `index` is out of range.
    @discardableResult
    public func remove(at index: Int) -> Element? {
        write { array in array.indices.contains(index) ? array.remove(at: index) : nil }
    }

    /// Removes and returns the first element, or nil when empty.
    @discardableResult
    public func removeFirst() -> Element? {
        write { array in array.isEmpty ? nil : array.removeFirst() }
    }

    /// Removes and returns the last element, or nil when empty.
    @discardableResult
    public func removeLast() -> Element? {
        write { $0.popLast() }
    }

    /// Removes every element that satisfies `shouldBeRemoved`; returns how many were removed.
    ///
    /// `shouldBeRemoved` runs on a snapshot with nothing held, so it may call back into the array, reads and
    /// writes alike. If the array changes meanwhile (from the predicate or another thread), the removal starts
    /// over on the new contents, so the predicate may be called more than once for an element.
    @discardableResult
    public func removeAll(where shouldBeRemoved: (Element) throws -> Bool) rethrows -> Int {
        // The predicate is caller code: run it on a snapshot with nothing held, so it may read or write the array
        // freely; apply the result only if no write happened meanwhile, else evaluate again on the new contents.
        while true {
            let (current, startVersion) = read { ($0, version) }
            var doomed: [Bool] = []
            doomed.reserveCapacity(current.count)
            for element in current { doomed.append(try shouldBeRemoved(element)) }
            let removed = doomed.count { $0 }
            if removed == 0 { return 0 }
            let applied = write { array -> Bool in
                // `write` counts itself as a change: compare with the version just before it.
                guard version == startVersion &+ 1 else { return false }
                var kept: [Element] = []
                kept.reserveCapacity(current.count - removed)
                for (index, element) in current.enumerated() where !doomed[index] { kept.append(element) }
                array = kept
                return true
            }
            if applied { return removed }
        }
    }

    /// Removes every element.
    public func removeAll() {
        write { $0.removeAll() }
    }

    /// Removes and returns every element at once (a drain: what a consumer thread takes from a producer).
    public func removeAllAndReturn() -> [Element] {
        write { array in
            defer { array.removeAll() }
            return array
        }
    }

    /// Runs `body` with exclusive access to the contents, for a compound change that must be atomic
    /// (check-then-insert, sort in place, replace a range).
    ///
    /// `body` may call back into this array: from the same thread such calls run inline, on the contents as
    /// `body` has left them so far (a write is visible to `body` when the call returns), instead of waiting for
    /// the queue this call holds.
    ///
    /// - Parameter body: The change; it runs on the calling thread with every other reader and writer waiting.
    /// - Returns: What `body` returns.
    /// - Warning: Keep `body` short: every other thread using the array waits for it. Do not call back into the
    ///   array from a closure that `body` passes to a method of the `inout` array itself (`array.sort { … }`):
    ///   the standard library has lent the storage out at that moment.
    @discardableResult
    public func mutate<R>(_ body: (inout [Element]) throws -> R) rethrows -> R {
        if isExclusiveOwner, let exclusiveStorage { return try body(&exclusiveStorage.pointee) }
        return try queue.sync(flags: .barrier) {
            // Move the contents out (no copy: `storage` gives up its reference) so the re-entrant path can reach
            // them through a pointer without overlapping the exclusive access to `storage` itself.
            version &+= 1
            var working = storage
            storage = []
            defer { storage = working }
            return try withUnsafeMutablePointer(to: &working) { pointer in
                exclusiveStorage = pointer
                exclusiveOwner.store(Self.currentThread, ordering: .releasing)
                defer {
                    exclusiveOwner.store(0, ordering: .releasing)
                    exclusiveStorage = nil
                }
                return try body(&pointer.pointee)
            }
        }
    }
}

extension ThreadSafeArray: Sequence {
    /// Iterates over a snapshot taken when iteration starts.
    public func makeIterator() -> IndexingIterator<[Element]> {
        snapshot.makeIterator()
    }

    public var underestimatedCount: Int { count }
}
