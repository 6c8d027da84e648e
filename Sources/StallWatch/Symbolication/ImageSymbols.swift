// ImageSymbols: names and source lines of one ELF image, shared by every stall and process that maps it.
import CStallWatchSymbols
import Synchronization

/// The symbol table and DWARF line tables of one ELF file, looked up by offset from the image's load base (the
/// address of file offset 0), so the same entry serves every process that maps the file, wherever it is loaded.
///
/// Two libdwfl sessions on the one file, each behind its own lock: names (the symbol table, loaded in a few ms
/// at most) and lines (DWARF, whose first load for a large Swift module takes tens of ms). A provisional report,
/// which needs names only, never waits behind a final report's first DWARF load. Each session keeps a bounded
/// table of answers per offset, misses included, and demangles each name once.
package final class ImageSymbols: Sendable {
    /// A function name at an offset.
    package struct Symbol: Sendable, Equatable {
        /// Demangled (Swift, C++), else as in the symbol table.
        package var name: String
        /// The short readable form, when it differs (``StackFrame/shortSymbol``).
        package var shortName: String?
        /// Bytes from the symbol's start to the offset looked up.
        package var offset: UInt64
    }

    /// A source location at an offset.
    package struct SourceLine: Sendable, Equatable {
        package var file: String
        package var line: Int?
    }

    /// What a lookup that must not wait for DWARF to load found.
    enum LineAnswer: Sendable, Equatable {
        /// The image's line tables are loaded: the location, or nil when there is none.
        case known(SourceLine?)
        /// The line tables are not loaded yet (or another thread is loading them): not looked up.
        case notLoaded
    }

    /// What the entry is cached under (``SymbolCache/Key``).
    package let key: SymbolCache.Key
    /// The file's GNU build-id, when it has one.
    package let buildID: String?
    private let names: Mutex<Table<Symbol>>
    private let lines: Mutex<Table<SourceLine>>
    private let counters: SymbolCache.Counters
    /// Answers kept per session; past it the table starts again (a stall touches a few hundred offsets).
    static let entryLimit = 1 << 15

    /// One libdwfl session and its answers. The session pointer is only used under the table's lock.
    private struct Table<Value> {
        var session: OpaquePointer?
        /// The session's address of file offset 0.
        var origin: UInt64 = 0
        var entries: [UInt64: Value?] = [:]
        /// Whether a lookup has run in the session (its DWARF is open, so the next ones are cheap); a table
        /// without a session has nothing to load.
        var loaded = false

        init(descriptor: Int32, name: String) {
            guard descriptor >= 0 else {
                loaded = true
                return
            }
            session = sw_symbols_open_descriptor(descriptor, name, nil)
            if let session, sw_symbols_file_address(session, 0, &origin) != 0 {
                sw_symbols_destroy(session)
                self.session = nil
            }
            loaded = session == nil
        }
    }

    /// Opens both sessions on the file `identity` checked; nil when libdwfl cannot read it as ELF.
    init?(identity: ImageIdentity, counters: SymbolCache.Counters) {
        let names = Table<Symbol>(descriptor: identity.duplicateDescriptor(), name: identity.path)
        guard names.session != nil else { return nil }
        let lines = Table<SourceLine>(descriptor: identity.duplicateDescriptor(), name: identity.path)
        key = identity.key
        buildID = identity.buildID
        self.names = Mutex(names)
        self.lines = Mutex(lines)
        self.counters = counters
        counters.imagesOpened.add(1, ordering: .relaxed)
    }

    deinit {
        names.withLock { if let session = $0.session { sw_symbols_destroy(session) } }
        lines.withLock { if let session = $0.session { sw_symbols_destroy(session) } }
    }

    /// The function containing `offset` bytes past the image's load base, or nil when the symbol table has none.
    /// The image's first lookup loads its symbol table.
    package func symbol(atOffset offset: UInt64) -> Symbol? {
        names.withLock { table in lookUpName(offset, in: &table) }
    }

    /// Whether the symbol table is loaded (a name lookup has run), without waiting for a thread loading it: a
    /// watching thread that must not wait for a table to load asks this first.
    var namesLoaded: Bool { names.withLockIfAvailable { $0.loaded } ?? false }

    private func lookUpName(_ offset: UInt64, in table: inout Table<Symbol>) -> Symbol? {
        cached(offset, in: &table) { session, address in
            var within: UInt64 = 0
            guard let raw = sw_symbols_name(session, address, &within) else { return nil }
            let mangled = String(cString: raw)
            let full = Demangler.demangle(mangled)
            return Symbol(name: full, shortName: StackFrame.shortSymbol(raw: mangled, full: full), offset: within)
        }
    }

    /// The value of `offset` in `table`, from its cache or else from `resolve` (given the session and the session's
    /// address of the offset), remembered either way; the first lookup marks the table loaded.
    private func cached<Value>(
        _ offset: UInt64, in table: inout Table<Value>, resolve: (OpaquePointer, UInt64) -> Value?
    ) -> Value? {
        if let known = table.entries[offset] {
            counters.hits.add(1, ordering: .relaxed)
            return known
        }
        counters.misses.add(1, ordering: .relaxed)
        let value = table.session.flatMap { resolve($0, table.origin &+ offset) }
        if !table.loaded {
            table.loaded = true
            counters.tablesLoaded.add(1, ordering: .releasing)
        }
        if table.entries.count >= Self.entryLimit { table.entries.removeAll(keepingCapacity: true) }
        table.entries[offset] = value
        return value
    }

    /// The source file and line of `offset` from DWARF, or nil when the image has no line information there.
    /// The image's first lookup loads its DWARF (libc's separate debug file: ~150 ms, nearly all of it libdw
    /// decompressing every debug section of the file).
    package func sourceLine(atOffset offset: UInt64) -> SourceLine? {
        lines.withLock { table in lookUp(offset, in: &table) }
    }

    /// The source file and line of `offset` if that costs no DWARF load and no wait: ``LineAnswer/notLoaded``
    /// when the image's line tables have not been loaded yet or another thread holds them (loading them, most
    /// likely). What a final report uses so that it is on disk at once; the lines follow in a rewrite.
    func sourceLineIfLoaded(atOffset offset: UInt64) -> LineAnswer {
        let answer = lines.withLockIfAvailable { table -> LineAnswer in
            // A known offset, or loaded tables: the lookup costs no DWARF load.
            guard table.loaded || table.entries.index(forKey: offset) != nil else { return .notLoaded }
            return .known(lookUp(offset, in: &table))
        }
        return answer ?? .notLoaded
    }

    /// Whether the line tables are loaded (a lookup has run), without waiting for a thread loading them.
    var linesLoaded: Bool { lines.withLockIfAvailable { $0.loaded } ?? false }

    private func lookUp(_ offset: UInt64, in table: inout Table<SourceLine>) -> SourceLine? {
        cached(offset, in: &table) { session, address in
            var line: Int32 = 0
            guard let file = sw_symbols_source(session, address, &line) else { return nil }
            return SourceLine(file: String(cString: file), line: line > 0 ? Int(line) : nil)
        }
    }
}
