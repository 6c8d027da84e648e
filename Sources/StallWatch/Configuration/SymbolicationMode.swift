// SymbolicationMode: how much a report's frames say (the `symbolication` setting).

/// How much symbolication to do when a report is written.
public enum SymbolicationMode: String, Codable, Sendable, CaseIterable {
    /// Function names, demangled, and file:line from DWARF where present.
    case full
    /// Function names only.
    case fast
    /// Image + offset only (symbolicate later with `stallwatch reports symbolicate`).
    case off
}
