// Demangler: readable names for Swift symbols (libswiftCore's swift_demangle) and C++ symbols (__cxa_demangle).
#if canImport(Glibc)
    import Glibc
#endif

/// Turns mangled Swift and C++ symbol names into readable ones; other names pass through unchanged.
///
/// Both demanglers are looked up at run time with `dlsym`, so nothing is linked that the process does not
/// already load (libswiftCore is in every Swift process; `__cxa_demangle` comes with libstdc++, which the Swift
/// runtime uses). Thread-safe; allocates.
enum Demangler {
    /// `char *swift_demangle(const char *name, size_t length, char *buffer, size_t *bufferSize, uint32_t flags)`
    private typealias SwiftDemangle =
        @convention(c) (UnsafePointer<CChar>?, Int, UnsafeMutablePointer<CChar>?, UnsafeMutablePointer<Int>?, UInt32)
        -> UnsafeMutablePointer<CChar>?
    /// `char *__cxa_demangle(const char *name, char *buffer, size_t *length, int *status)`
    private typealias CxxDemangle =
        @convention(c) (
            UnsafePointer<CChar>?, UnsafeMutablePointer<CChar>?, UnsafeMutablePointer<Int>?,
            UnsafeMutablePointer<Int32>?
        ) -> UnsafeMutablePointer<CChar>?

    /// `char *_swift_backtrace_demangle(const char *name, size_t length, char *buffer, size_t *bufferSize)`: the
    /// Swift runtime backtracer's own demangler (simplified options: no module prefixes, no parameter types,
    /// `specialized` instead of the specialization's description; C++ names too). Runtime SPI, exported by
    /// libswiftCore on Linux; when it is missing, no short names are made.
    private typealias BacktraceDemangle =
        @convention(c) (UnsafePointer<CChar>?, Int, UnsafeMutablePointer<CChar>?, UnsafeMutablePointer<Int>?)
        -> UnsafeMutablePointer<CChar>?

    private struct Functions: @unchecked Sendable {
        // @unchecked Sendable: Immutable C function pointers; the three demanglers are thread-safe.
        let swift: SwiftDemangle?
        let cxx: CxxDemangle?
        let short: BacktraceDemangle?
    }

    // Resolved once; dlopen(NULL) is the global scope, so this finds whatever copy the process already uses.
    private static let functions: Functions = {
        let handle = dlopen(nil, RTLD_NOW)
        func lookup<F>(_ name: String, as type: F.Type) -> F? {
            guard let handle, let symbol = dlsym(handle, name) else { return nil }
            return unsafeBitCast(symbol, to: type)
        }
        return Functions(
            swift: lookup("swift_demangle", as: SwiftDemangle.self),
            cxx: lookup("__cxa_demangle", as: CxxDemangle.self),
            short: lookup("_swift_backtrace_demangle", as: BacktraceDemangle.self))
    }()

    /// Whether `name` carries a Swift mangling prefix (`$s`, `_$s`, `$S`, `_T0`, `$e`).
    static func isSwiftMangled(_ name: String) -> Bool {
        name.hasPrefix("$s") || name.hasPrefix("_$s") || name.hasPrefix("$S") || name.hasPrefix("_$S")
            || name.hasPrefix("_T0") || name.hasPrefix("$e")
    }

    /// The readable form of `name`, or `name` itself when it is not mangled or cannot be demangled.
    static func demangle(_ name: String) -> String {
        if isSwiftMangled(name) { return demangleSwift(name) ?? name }
        if name.hasPrefix("_Z") { return demangleCxx(name) ?? name }
        return name
    }

    /// The Swift backtracer's short form of a mangled name (`specialized static Stalls.stallOnCPU(durationMs:)`,
    /// `_merge<A>(low:mid:high:buffer:by:)`, `std::vector<int>::push_back(int const&)`); nil when `name` is not
    /// mangled, cannot be demangled, or the runtime does not export the backtracer's demangler.
    ///
    /// Costs about 4 µs a name (measured here, the same as `swift_demangle`): symbolicators cache it per name.
    static func shortName(_ name: String) -> String? {
        guard isSwiftMangled(name) || name.hasPrefix("_Z"), let function = functions.short else { return nil }
        let utf8 = Array(name.utf8)
        let result = utf8.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { function($0.baseAddress, $0.count, nil, nil) }
        }
        guard let result else { return nil }
        defer { free(result) }
        let short = String(cString: result)
        return short.isEmpty ? nil : short
    }

    /// Demangles a Swift symbol with the runtime's own demangler; nil when it is not a Swift name.
    static func demangleSwift(_ name: String) -> String? {
        guard let function = functions.swift else { return nil }
        let utf8 = Array(name.utf8)
        let result = utf8.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { function($0.baseAddress, $0.count, nil, nil, 0) }
        }
        guard let result else { return nil }
        defer { free(result) }
        return String(cString: result)
    }

    /// Demangles an Itanium C++ ABI symbol (`_Z…`); nil when it is not one.
    static func demangleCxx(_ name: String) -> String? {
        guard let function = functions.cxx else { return nil }
        var status: Int32 = 0
        guard let result = function(name, nil, nil, &status) else { return nil }
        defer { free(result) }
        return status == 0 ? String(cString: result) : nil
    }
}

extension StackFrame {
    /// The short form of a raw (mangled) symbol, kept only when it differs from its full demangled form `full`.
    package static func shortSymbol(raw: String, full: String) -> String? {
        guard let short = Demangler.shortName(raw), short != full else { return nil }
        return short
    }
}
