// A frame of a backtrace and a loaded image: what every stack in a report is made of.

/// One frame of a backtrace.
public struct StackFrame: Codable, Sendable, Equatable, Hashable {
    /// The program counter (innermost frame) or return address (callers); hex in JSON.
    public var address: UInt64
    /// Path of the image the address falls in.
    public var image: String?
    /// `address - image load base` (hex in JSON): with the image's build-id, enough to symbolicate anywhere.
    public var offset: UInt64?
    /// Demangled function name.
    public var symbol: String?
    /// Bytes from the start of the function.
    package var symbolOffset: Int?
    public var file: String?
    public var line: Int?
    /// The short name of ``symbol`` in the Swift backtracer's style (``StackFrame/readableName``); nil when it is the
    /// same as ``symbol`` (C names) or unknown (reports written before it existed).
    package var shortSymbol: String?
    /// What the address is when it is not a return address found on the stack of the frame below; nil for ordinary
    /// frames (the program counter, return addresses).
    package var kind: Kind?

    /// Frames that are not ordinary return addresses.
    package enum Kind: String, Codable, Sendable, Hashable {
        /// A Swift async function awaiting the one below it: its resume point (the start of the partial function
        /// where it continues), taken from the async context chain, not from the machine stack.
        case async
        /// A return address on another stack than the frame below: a runtime switched stacks to call foreign code
        /// (Go's cgo: the C code runs on the thread's system stack, its Go callers are on the goroutine stack), and
        /// this frame and those above were found by a frame-pointer walk of the stack it left.
        case stackSwitch
    }

    package init(
        address: UInt64, image: String? = nil, offset: UInt64? = nil, symbol: String? = nil,
        symbolOffset: Int? = nil, file: String? = nil, line: Int? = nil, shortSymbol: String? = nil
    ) {
        self.address = address
        self.image = image
        self.offset = offset
        self.symbol = symbol
        self.symbolOffset = symbolOffset
        self.file = file
        self.line = line
        self.shortSymbol = shortSymbol
    }
}

/// A loaded ELF image.
package struct ImageInfo: Codable, Sendable, Equatable, Hashable {
    package var path: String
    /// The GNU build-id note, lowercase hex; nil when the image has none.
    package var buildId: String?
    /// Load base (the address of file offset 0); hex in JSON.
    package var base: UInt64
    /// Bytes from `base` to the end of the image's last mapping.
    package var size: UInt64?

    package init(path: String, buildId: String?, base: UInt64, size: UInt64?) {
        self.path = path
        self.buildId = buildId
        self.base = base
        self.size = size
    }
}
