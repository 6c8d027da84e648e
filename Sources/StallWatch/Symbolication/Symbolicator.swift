// Placeholder API of the symbolication stage (filled in by the symbolication work).

/// How much symbolication to do when a report is written.
public enum SymbolicationMode: String, Codable, Sendable, CaseIterable {
    /// Function names, demangled, and file:line from DWARF where present.
    case full
    /// Function names only.
    case fast
    /// Image + offset only (symbolicate later with `stallwatch reports symbolicate`).
    case off
}

/// Turns addresses of one process into frames (image, offset, symbol, file:line). Not thread-safe.
public final class Symbolicator: @unchecked Sendable {
    public let processID: Int32
    public let mode: SymbolicationMode

    public init(processID: Int32, mode: SymbolicationMode) {
        self.processID = processID
        self.mode = mode
    }

    /// `addresses[0]` is the exact program counter; later ones are return addresses (looked up at address − 1).
    public func symbolicate(_ addresses: [UInt64]) -> [StackFrame] {
        addresses.map { StackFrame(address: $0.hexAddress) }
    }

    /// The images that `frames` point into, with build-id and load base.
    public func images(for frames: [StackFrame]) -> [ImageInfo] { [] }
}
