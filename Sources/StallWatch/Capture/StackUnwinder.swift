// Placeholder API of the unwinder (filled in by the capture work).

/// The return addresses recovered from one capture, innermost first.
public struct UnwoundStack: Sendable {
    public var addresses: [UInt64]
    /// Why unwinding stopped early, if it did (nil when it reached the outermost frame).
    public var error: String?
    public var unwindNanoseconds: UInt64

    public init(addresses: [UInt64], error: String?, unwindNanoseconds: UInt64) {
        self.addresses = addresses
        self.error = error
        self.unwindNanoseconds = unwindNanoseconds
    }
}

/// Unwinds copied stacks of one process with libunwind's remote API. Not thread-safe: one per watchdog.
public final class StackUnwinder: @unchecked Sendable {
    public let processID: Int32

    public init(processID: Int32) throws(StallWatchError) {
        self.processID = processID
    }

    public func unwind(_ capture: StackCapture, maxFrames: Int) -> UnwoundStack {
        UnwoundStack(addresses: [], error: "unwinder not built yet", unwindNanoseconds: 0)
    }
}
