// Symbolicator: the symbolication stage, turning a process's raw addresses into frames and image records.
import CStallWatchCore
import CStallWatchSymbols

#if canImport(Glibc)
    import Glibc
#endif

/// Turns addresses of one process into frames (image, offset, symbol, file:line). Not thread-safe.
///
/// Images and offsets come from `/proc/<pid>/maps` (``ImageMap``) in every mode, so a report can always be
/// symbolicated later elsewhere from image build-id + offset. Names and lines come from elfutils' libdwfl, which
/// reads `.symtab`/`.dynsym` (including non-exported symbols, unlike `dladdr`) and DWARF line tables, and uses
/// separate debug files under `/usr/lib/debug` when installed. Each image file's tables live in a
/// ``SymbolCache`` shared by every symbolicator of the process (every stall, every report stage, every process
/// the daemon watches), keyed by build-id; an image whose mapped file cannot be checked (the vDSO, a replaced
/// file without `map_files` access) is looked up in a libdwfl session of this process instead. Results are also
/// cached per address; when an address falls in no known image the mappings are re-read once per call (a
/// library may have been `dlopen`ed).
///
/// Not thread-safe: use one instance per thread (the watchdog's), off the loop thread.
package final class Symbolicator: @unchecked Sendable {
    // @unchecked Sendable: only handed to the one thread that symbolicates (it is not thread-safe).
    package let processID: Int32
    package let mode: SymbolicationMode
    /// Problems met so far (libdwfl could not start, maps unreadable), one line each, for the report's
    /// `capture.errors`. Each distinct problem is recorded once.
    package private(set) var errors: [String] = []
    /// In `full` mode, whether a frame's file:line may wait for its image's line tables to load (the first
    /// lookup in an image loads its DWARF: tens of ms for a Swift module, ~150 ms for libc's separate debug
    /// file). When false, frames of images whose tables are not loaded yet get no file:line and count in
    /// ``pendingLineLookups``: what a final report does to be on disk at once, the lines following in a rewrite.
    var waitsForLines = true {
        didSet { pendingFrames.removeAll(keepingCapacity: true) }
    }
    /// Frames given without file:line because their image's line tables were not loaded (``waitsForLines``
    /// false), counted since this symbolicator was made. Such frames are not cached: a later call looks again.
    private(set) var pendingLineLookups = 0
    /// Whether a lookup may wait for an image's symbol table to load. The first lookup in an image opens its file
    /// and loads its table (tens of ms for a large binary, ten times that on a loaded machine); when false, a frame
    /// of an image whose table is not loaded yet — or is being loaded by another thread — gets image and offset but
    /// no name, and counts in ``pendingNameLookups``: what a watching thread does, which must go on sampling while
    /// a report queue loads the tables and writes the names.
    var waitsForNames = true {
        didSet { pendingFrames.removeAll(keepingCapacity: true) }
    }
    /// Frames given without a name or a line because their tables were not loaded (or were busy), kept while
    /// nothing could change that answer: until a table loads anywhere (``SymbolCache/generation``), this
    /// symbolicator opens its process session, ``waitsForNames`` or ``waitsForLines`` changes, and for at most
    /// ``pendingFramesNanos`` (a table busy with another thread's lookup). The stacks of a thousand threads parked
    /// in one place then cost one lookup, not a thousand, each reading the image's build ID: a watching thread
    /// building a provisional report stopped sampling for 350 ms.
    private var pendingFrames: [FrameKey: (frame: StackFrame, namesPending: Bool)] = [:]
    private var pendingFramesSince: UInt64 = 0
    private var pendingFramesGeneration = 0
    private static let pendingFramesNanos: UInt64 = 100_000_000
    /// Frames given without a name because their image's symbol table was not loaded (``waitsForNames`` false),
    /// counted since this symbolicator was made. Such frames are not cached: a later call looks again.
    private(set) var pendingNameLookups = 0

    private struct Resolved {
        var image: ImageMap.Image
        var symbol: String?
        var shortSymbol: String?
        var symbolOffset: UInt64
        var file: String?
        var line: Int?
        /// file:line not looked up: the image's line tables were not loaded (not cached, counted).
        var linesPending = false
        /// No name looked up: the image's symbol table was not loaded (not cached, counted).
        var namesPending = false
    }

    private var imageMap: ImageMap?
    private var session: OpaquePointer?
    private var sessionUnavailable = false
    private var cache: [UInt64: Resolved] = [:]
    private struct FrameKey: Hashable {
        var address: UInt64
        var exact: Bool
    }
    /// Finished frames: the warm path is one dictionary lookup per address.
    private var frameCache: [FrameKey: StackFrame] = [:]
    private var demangled: [String: (full: String, short: String?)] = [:]
    private var buildIDs: [String: String?] = [:]
    /// Where the shared cache keeps each image's tables; nil for images looked up in the process session.
    private var sharedImages: [ImageMap.Image: ImageSymbols?] = [:]
    /// The shared cache's key of each image checked while its tables were not loaded (nil: not a file it keeps),
    /// so that a stack of many frames in one image reads its file's build ID once, not once per frame.
    private var checkedKeys: [ImageMap.Image: SymbolCache.Key?] = [:]
    private let symbolCache: SymbolCache
    /// JIT code's names, when the runtime writes a perf map.
    private lazy var perfMap = PerfMap(processID: processID)
    private static let cacheLimit = 1 << 16
    /// When the image map was last read (CLOCK_MONOTONIC_COARSE), and how often an unknown address may re-read it.
    private var mapReadAt: UInt64 = 0
    private static let mapRefreshNanos: UInt64 = 1_000_000_000

    /// Creates a symbolicator for `processID` (which may be this process). Nothing is read until first use.
    /// - Parameter cache: Where image tables are shared (tests pass their own to count what it does).
    package init(processID: Int32, mode: SymbolicationMode, cache: SymbolCache = .shared) {
        self.processID = processID
        self.mode = mode
        symbolCache = cache
    }

    deinit { if let session { sw_symbols_destroy(session) } }

    /// Symbolicates a plain backtrace (``UnwoundFrame/backtrace(_:)``): `addresses[0]` is the program counter,
    /// the later ones return addresses.
    /// - Parameter addresses: innermost first.
    /// - Returns: one frame per address; a frame in no image has only its address.
    package func symbolicate(_ addresses: [UInt64]) -> [StackFrame] {
        symbolicate(UnwoundFrame.backtrace(addresses))
    }

    /// Symbolicates one captured stack, each frame looked up as its kind says (``UnwoundFrame/lookupAddress``: a
    /// return address at address − 1, so that a call at the very end of a function is attributed to it; the
    /// program counter and async resume points exactly) and given the report kind it implies. Every frame keeps
    /// its original address, and `symbolOffset` is measured from that original address.
    /// - Parameter unwound: innermost first.
    /// - Returns: one frame per captured frame; a frame in no image has only its address.
    package func symbolicate(_ unwound: [UnwoundFrame]) -> [StackFrame] {
        // Read before any lookup: a table that loads during this call makes the next call look again.
        let generation = symbolCache.generation
        if !pendingFrames.isEmpty,
            generation != pendingFramesGeneration
                || Self.coarseNanos() &- pendingFramesSince > Self.pendingFramesNanos
        {
            pendingFrames.removeAll(keepingCapacity: true)
        }
        var refreshed = false
        var frames: [StackFrame] = []
        frames.reserveCapacity(unwound.count)
        for captured in unwound {
            let address = captured.address
            let lookup = captured.lookupAddress
            let key = FrameKey(address: address, exact: lookup == address)
            if var frame = frameCache[key] {
                frame.kind = captured.reportKind
                frames.append(frame)
                continue
            }
            if let pending = pendingFrames[key] {
                if pending.namesPending { pendingNameLookups += 1 } else { pendingLineLookups += 1 }
                var frame = pending.frame
                frame.kind = captured.reportKind
                frames.append(frame)
                continue
            }
            guard let resolved = resolve(lookup, refreshed: &refreshed) else {
                // Not cached: the address may belong to a library loaded later, or to JIT code.
                var frame = StackFrame(address: address)
                if mode != .off, let jit = perfMap.lookup(lookup) {
                    frame.symbol = jit.name
                    frame.symbolOffset = Int(truncatingIfNeeded: jit.offset &+ (address &- lookup))
                }
                frame.kind = captured.reportKind
                frames.append(frame)
                continue
            }
            var frame = StackFrame(
                address: address, image: resolved.image.path,
                offset: address &- resolved.image.base, symbol: resolved.symbol,
                symbolOffset: resolved.symbol.map { _ in
                    Int(truncatingIfNeeded: resolved.symbolOffset &+ (address &- lookup))
                },
                file: resolved.file, line: resolved.line, shortSymbol: resolved.shortSymbol)
            if resolved.namesPending || resolved.linesPending {
                if resolved.namesPending { pendingNameLookups += 1 } else { pendingLineLookups += 1 }
                if pendingFrames.count >= Self.cacheLimit { pendingFrames.removeAll(keepingCapacity: true) }
                if pendingFrames.isEmpty {
                    (pendingFramesSince, pendingFramesGeneration) = (Self.coarseNanos(), generation)
                }
                pendingFrames[key] = (frame, resolved.namesPending)
            } else {
                if frameCache.count >= Self.cacheLimit { frameCache.removeAll(keepingCapacity: true) }
                frameCache[key] = frame
            }
            frame.kind = captured.reportKind
            frames.append(frame)
        }
        return frames
    }

    /// The images that `frames` point into, in order of first appearance, with build-id, load base and size.
    package func images(for frames: [StackFrame]) -> [ImageInfo] {
        var seen = Set<String>()
        var result: [ImageInfo] = []
        for frame in frames {
            guard let path = frame.image, seen.insert(path).inserted else { continue }
            let byAddress = currentImageMap()?.image(containing: frame.address)
            guard let image = byAddress?.path == path ? byAddress : currentImageMap()?.image(path: path) else {
                result.append(ImageInfo(path: path, buildId: buildID(ofImageAt: path), base: 0, size: nil))
                continue
            }
            result.append(
                ImageInfo(
                    path: path, buildId: buildID(ofImageAt: path), base: image.base, size: image.size))
        }
        return result
    }

    /// The process's main executable (`/proc/<pid>/exe`) with its build-id, or nil when it cannot be read.
    package func executableImage() -> ImageInfo? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = readlink("/proc/\(processID)/exe", &buffer, buffer.count - 1)
        guard count > 0 else { return nil }
        var path = String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        if path.hasSuffix(" (deleted)") { path.removeLast(" (deleted)".count) }
        let image = currentImageMap()?.image(path: path)
        return ImageInfo(
            path: path, buildId: buildID(ofImageAt: path), base: image?.base ?? 0, size: image?.size)
    }

    // MARK: - Lookup

    private func resolve(_ address: UInt64, refreshed: inout Bool) -> Resolved? {
        if let hit = cache[address] { return hit }
        var image = currentImageMap()?.image(containing: address)
        if image == nil, !refreshed, Self.coarseNanos() &- mapReadAt >= Self.mapRefreshNanos {
            // Not in any image we know: maybe dlopen'ed since we last looked. Re-read at most once per backtrace
            // and per second: a report symbolicates dozens of stacks (samples, every thread), and those with a
            // frame in anonymous memory (JIT code, a corrupt return address) would each re-read the whole map.
            refreshed = true
            let previous = imageMap
            imageMap = nil
            image = currentImageMap()?.image(containing: address)
            // A target that has exited has no maps left to read: keep what was read while it ran.
            if imageMap == nil { imageMap = previous }
            if image != nil, let session { _ = sw_symbols_refresh(session) }
        }
        guard let image else { return nil }
        var resolved = Resolved(image: image, symbolOffset: 0)
        if mode != .off, !waitsForNames, !namesLoaded(for: image) {
            resolved.namesPending = true
            return resolved
        }
        if mode != .off, let shared = sharedSymbols(for: image) {
            let offset = address &- image.base
            if let symbol = shared.symbol(atOffset: offset) {
                (resolved.symbol, resolved.shortSymbol, resolved.symbolOffset) = (
                    symbol.name, symbol.shortName, symbol.offset
                )
            }
            if mode == .full {
                var source: ImageSymbols.SourceLine?
                if waitsForLines {
                    source = shared.sourceLine(atOffset: offset)
                } else {
                    switch shared.sourceLineIfLoaded(atOffset: offset) {
                    case .known(let known): source = known
                    case .notLoaded: resolved.linesPending = true
                    }
                }
                if let source { (resolved.file, resolved.line) = (source.file, source.line) }
            }
        } else if mode != .off, let session = currentSession() {
            var offset: UInt64 = 0
            if let name = sw_symbols_name(session, address, &offset) {
                (resolved.symbol, resolved.shortSymbol) = demangle(String(cString: name))
                resolved.symbolOffset = offset
            }
            if mode == .full {
                var line: Int32 = 0
                if let file = sw_symbols_source(session, address, &line) {
                    resolved.file = String(cString: file)
                    resolved.line = line > 0 ? Int(line) : nil
                }
            }
        }
        if !resolved.linesPending {
            if cache.count >= Self.cacheLimit { cache.removeAll(keepingCapacity: true) }
            cache[address] = resolved
        }
        return resolved
    }

    /// The full demangled name and, when it differs, the short one (``StackFrame/shortSymbol``); cached.
    private func demangle(_ name: String) -> (full: String, short: String?) {
        if let known = demangled[name] { return known }
        let full = Demangler.demangle(name)
        let names = (full, StackFrame.shortSymbol(raw: name, full: full))
        demangled[name] = names
        return names
    }

    /// What this symbolicator knows of its process's images: the image map and the checked files behind the
    /// images some addresses fall in. Read while the process runs, it lets another symbolicator of the same process
    /// (``adopt(_:)``) name frames after the process has exited.
    package struct ImageSnapshot: @unchecked Sendable {  // Immutable; ImageSymbols is thread-safe.
        fileprivate let map: ImageMap
        fileprivate let images: [ImageMap.Image: ImageSymbols?]
    }

    /// The image map (read now if it was not yet) and the shared tables of the images `addresses` fall in; nil
    /// when the map cannot be read.
    package func imageSnapshot(for addresses: [UInt64]) -> ImageSnapshot? {
        guard let map = currentImageMap() else { return nil }
        var images: [ImageMap.Image: ImageSymbols?] = [:]
        if mode != .off {
            for address in addresses {
                if let image = map.image(containing: address), images[image] == nil {
                    images[image] = sharedSymbols(for: image)
                }
            }
        }
        return ImageSnapshot(map: map, images: images)
    }

    /// Takes what another symbolicator of the same process read while it ran (``imageSnapshot(for:)``): its image
    /// map, when this one has none yet, and the files it checked.
    package func adopt(_ snapshot: ImageSnapshot) {
        if imageMap == nil {
            imageMap = snapshot.map
            mapReadAt = Self.coarseNanos()
        }
        for (image, symbols) in snapshot.images where symbols != nil && (sharedImages[image] ?? nil) == nil {
            sharedImages[image] = symbols
        }
    }

    /// Reads the process's image map, checks the files behind the images `addresses` fall in and opens the
    /// symbol session now, while the process surely exists, and keeps them: a target that exits during a stall
    /// still gets symbols and images in its final report.
    func prepare(addresses: [UInt64] = []) {
        guard let map = currentImageMap(), mode != .off else { return }
        for address in addresses {
            if let image = map.image(containing: address) { _ = sharedSymbols(for: image) }
        }
        _ = currentSession()
    }

    /// Whether `image`'s names can be looked up without loading a table: its shared entry exists with its symbol
    /// table loaded (an entry not opened yet is not opened here), or, for an image looked up in the process
    /// session, that session is open.
    private func namesLoaded(for image: ImageMap.Image) -> Bool {
        let sessionReady = session != nil || sessionUnavailable
        if let known = sharedImages[image] { return known?.namesLoaded ?? sessionReady }
        let key: SymbolCache.Key?
        if let checked = checkedKeys[image] {
            key = checked
        } else {
            key = ImageIdentity(image: image, processID: processID)?.key
            checkedKeys[image] = key
        }
        guard let key else { return sessionReady }
        guard let existing = symbolCache.existingSymbols(forKey: key) else { return false }
        sharedImages[image] = existing
        return existing?.namesLoaded ?? sessionReady
    }

    /// The shared tables of `image`'s file, checked once per image and kept; nil for the process session.
    private func sharedSymbols(for image: ImageMap.Image) -> ImageSymbols? {
        if let known = sharedImages[image] { return known }
        let symbols = ImageIdentity(image: image, processID: processID).flatMap { symbolCache.symbols(for: $0) }
        sharedImages[image] = symbols
        return symbols
    }

    private func currentImageMap() -> ImageMap? {
        if let imageMap { return imageMap }
        mapReadAt = Self.coarseNanos()
        do {
            imageMap = try ImageMap(processID: processID)
        } catch {
            record("cannot read the mappings of process \(processID): \(error.message)")
        }
        return imageMap
    }

    private func currentSession() -> OpaquePointer? {
        if let session { return session }
        if sessionUnavailable { return nil }
        var code: Int32 = 0
        session = sw_symbols_create(processID, &code)
        pendingFrames.removeAll(keepingCapacity: true)
        if session == nil {
            sessionUnavailable = true
            let reason = code > 0 ? String(cString: strerror(code)) : String(cString: sw_symbols_last_error())
            record(
                "symbol lookup unavailable for process \(processID) (libdwfl: \(reason)); frames keep image + offset")
        }
        return session
    }

    /// Reads the build-id from the file, through `/proc/<pid>/root` for another process (its mount namespace).
    private func buildID(ofImageAt path: String) -> String? {
        if let known = buildIDs[path] { return known }
        // The id of the file checked against the mapping, when there is one (the path may hold a newer build).
        if let image = currentImageMap()?.image(path: path),
            let checked = (sharedImages[image] ?? nil)?.buildID
                ?? ImageIdentity(image: image, processID: processID)?.buildID
        {
            buildIDs[path] = checked
            return checked
        }
        var id: String?
        if path.hasPrefix("/") {
            if processID != getpid() { id = BuildID.ofFile(atPath: "/proc/\(processID)/root\(path)") }
            if id == nil { id = BuildID.ofFile(atPath: path) }
        } else if !waitsForNames, session == nil, !sessionUnavailable {
            return nil  // the process session is not open yet: looked up (and kept) by a later call
        } else if let image = currentImageMap()?.image(path: path), let session = currentSession() {
            // [vdso] has no file; libdwfl reads its note from the process's memory.
            var info = sw_module_info()
            if sw_symbols_module(session, image.base, &info) == 0, let bits = info.build_id {
                id = BuildID.hex(UnsafeBufferPointer(start: bits, count: info.build_id_length))
            }
        }
        buildIDs[path] = id
        return id
    }

    private static func coarseNanos() -> UInt64 { sw_monotonic_coarse_ns() }

    private func record(_ problem: String) {
        if !errors.contains(problem) { errors.append(problem) }
    }
}
