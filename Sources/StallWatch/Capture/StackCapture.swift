// Placeholder API of the capture stage (filled in by the capture work).

/// A copy of a thread's registers and live stack, taken in a signal handler or through ptrace.
public struct StackCapture: Sendable {
    public var threadID: Int32
    /// General registers in libunwind's x86_64 numbering (UNW_X86_64_RAX … UNW_X86_64_RIP), 17 values.
    public var registers: [UInt64]
    /// The stack pointer at capture; `stack[0]` is the byte at this address.
    public var stackPointer: UInt64
    public var stack: [UInt8]
    /// Signal sent (or ptrace interrupt requested) → registers and stack copied, nanoseconds.
    public var pauseNanoseconds: UInt64
    /// Time spent inside the handler copying, nanoseconds (0 for ptrace).
    public var handlerNanoseconds: UInt64

    public init(
        threadID: Int32, registers: [UInt64], stackPointer: UInt64, stack: [UInt8], pauseNanoseconds: UInt64,
        handlerNanoseconds: UInt64
    ) {
        self.threadID = threadID
        self.registers = registers
        self.stackPointer = stackPointer
        self.stack = stack
        self.pauseNanoseconds = pauseNanoseconds
        self.handlerNanoseconds = handlerNanoseconds
    }
}
