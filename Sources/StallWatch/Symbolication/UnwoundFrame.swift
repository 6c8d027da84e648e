// UnwoundFrame: one address of a captured stack and what it is, from the unwinder to the report builder.

/// One frame of a captured stack: its address, and what that address is, which decides how it is looked up and
/// what the report's frame says.
///
/// The unwinder makes them (the program counter, the callers' return addresses), the async frame walker inserts
/// resume points, the stack-switch walker marks where it crossed to another stack; the symbolicator looks each
/// one up by its kind, and the report builder gives each its report kind. No array of indices travels beside
/// the addresses, and nothing decides by position what an address is.
package enum UnwoundFrame: Sendable, Hashable {
    /// The thread's program counter at capture (the innermost frame): the very instruction, looked up as is.
    case programCounter(UInt64)
    /// A caller's return address: the instruction after the call, looked up one byte back, inside the call (a
    /// call at the very end of a function belongs to it).
    case returnAddress(UInt64)
    /// A Swift async frame recovered from the async context chain: an awaiting caller's resume point, the first
    /// instruction of its partial function, looked up as is (report kind `async`).
    case asyncResumePoint(UInt64)
    /// The first frame past a runtime's stack switch (Go's cgo): a return address found on the stack the thread
    /// left (report kind `stackSwitch`).
    case stackSwitch(UInt64)

    package var address: UInt64 {
        switch self {
        case .programCounter(let address), .returnAddress(let address), .asyncResumePoint(let address),
            .stackSwitch(let address):
            address
        }
    }

    /// Where the address is looked up: a return address one byte back, inside its call; the others as they are.
    package var lookupAddress: UInt64 {
        switch self {
        case .returnAddress(let address), .stackSwitch(let address): address == 0 ? 0 : address - 1
        case .programCounter(let address), .asyncResumePoint(let address): address
        }
    }

    /// The report's frame kind (`StackFrame.Kind`), nil for the program counter and plain return addresses.
    var reportKind: StackFrame.Kind? {
        switch self {
        case .asyncResumePoint: .async
        case .stackSwitch: .stackSwitch
        case .programCounter, .returnAddress: nil
        }
    }

    /// A plain backtrace, innermost first: the program counter, then return addresses (what a frame-pointer or
    /// CFI walk gives, and what callers that hold bare addresses mean).
    static func backtrace(_ addresses: [UInt64]) -> [UnwoundFrame] {
        addresses.enumerated().map { $0.offset == 0 ? .programCounter($0.element) : .returnAddress($0.element) }
    }

    /// The frame a report's frame stands for: its kind says a resume point or a stack switch; otherwise the
    /// report's innermost frame (index 0, the report format's rule) is the program counter and the others are
    /// return addresses. What offline symbolication looks a stored frame up by.
    package init(_ frame: StackFrame, innermost: Bool) {
        switch frame.kind {
        case .async?: self = .asyncResumePoint(frame.address)
        case .stackSwitch?: self = .stackSwitch(frame.address)
        default: self = innermost ? .programCounter(frame.address) : .returnAddress(frame.address)
        }
    }

    /// The same kind of frame at another address (the unwinder's frames, moved by a walker).
    func with(address: UInt64) -> UnwoundFrame {
        switch self {
        case .programCounter: .programCounter(address)
        case .returnAddress: .returnAddress(address)
        case .asyncResumePoint: .asyncResumePoint(address)
        case .stackSwitch: .stackSwitch(address)
        }
    }
}
