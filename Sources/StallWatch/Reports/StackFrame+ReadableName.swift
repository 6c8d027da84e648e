// StackFrame+ReadableName: the name people read for a frame, the Swift backtracer's short style.

extension StackFrame {
    /// The name every human view and export shows: ``shortSymbol`` (the Swift backtracer's short style,
    /// `specialized static Stalls.stallOnCPU(durationMs:)`) when known, else the full demangled ``symbol``.
    ///
    /// JSON reports keep both: `symbol` for the exact function, `shortSymbol` for reading. Bracketed parts of the
    /// full name (`<Arg[1] = Dead>`, `<A>` in parameter types) are also what pprof strips from a name.
    package var readableName: String? { shortSymbol ?? symbol }
}
