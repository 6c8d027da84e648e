// StackCapture: a copy of one thread's registers and live stack, the input of the unwinder.
import CStallWatchCore

/// A copy of a thread's registers and live stack, taken in a signal handler (``SignalSampler``) or through
/// ptrace (the capture helper, ``ThreadCaptureHelper``, or the sidecar's `PtraceSampler`).
///
/// The copy is self-contained: ``StackUnwinder`` turns it into return addresses later, off the sampled thread,
/// while the thread runs on.
package struct StackCapture: Sendable {
    /// Number of entries in ``registers`` (`SW_REGISTER_COUNT` of `sw_registers.h`).
    static let registerCount = Int(SW_REGISTER_COUNT)

    package var threadID: Int32
    /// General registers in the layout of `sw_registers.h` (libunwind's x86_64 numbering, index `SW_REG_RAX` …
    /// `SW_REG_RIP`): RAX, RDX, RCX, RBX, RSI, RDI, RBP, RSP, R8 … R15, RIP.
    package var registers: [UInt64]
    /// Where the copy starts (`stack[0]` is the byte at this address): the stack pointer less the x86-64 red zone
    /// (128 bytes) for the signal and ptrace captures, the stack pointer itself for the others; the stack pointer
    /// is `registers[SW_REG_RSP]`. The red zone matters: at an epilogue's `ret`, some CFI (libswiftSwiftOnoneSupport's)
    /// still reads the caller's RBP at CFA-16, the word just popped, below the stack pointer.
    var stackPointer: UInt64
    package var stack: [UInt8]
    /// Signal sent (or ptrace interrupt requested) → registers and stack copied (for ptrace: → detached),
    /// nanoseconds. This is how long the sampled thread was kept from its own work.
    package var pauseNanoseconds: UInt64
    /// Time spent inside the handler copying, nanoseconds (0 for ptrace).
    package var handlerNanoseconds: UInt64
    /// Bounds of the thread's stack (0/0 if unknown). The unwinder refuses reads inside them that the copy
    /// does not cover, because the live stack has changed since.
    package var stackLow: UInt64
    package var stackHigh: UInt64
    /// Partial failures of this capture, one sentence each (stack truncated, SP outside the stack, …).
    package var notes: [String]
    /// For ptrace: interrupt requested → the stop seen, nanoseconds (part of ``pauseNanoseconds``). Long when the
    /// thread was inside a kernel call that does not stop (an fsync in state D) or was waiting for a CPU.
    var stopWaitNanoseconds: UInt64
    /// For ptrace: the stop found the thread leaving a system call that the stop alone had cut short (it would
    /// have returned EINTR), and the call was set to run again after the detach.
    var restartedCall = false
    /// For ptrace: the system call whose boundary the thread stopped at (it was in that call, or had just entered
    /// or left it: `ORIG_RAX` at the stop), nil when the stop interrupted user-space code. It names the call a
    /// thread was working in when `/proc/…/syscall` could only say "running".
    var stopSyscall: Int?

    /// The call at the stop (``stopSyscall``) as `/proc/…/syscall` would show it: the system-call argument registers
    /// (rdi, rsi, rdx, r10, r8, r9), the stack pointer and the program counter — read before any restart of the call
    /// rewinds the program counter. Nil when the stop interrupted user-space code.
    var stopWait: ThreadWait? {
        guard let number = stopSyscall, registers.count > Int(SW_REG_RIP) else { return nil }
        let r = { (index: Int) in self.registers[index] }
        return ThreadWait(
            number: number,
            arguments: [r(SW_REG_RDI), r(SW_REG_RSI), r(SW_REG_RDX), r(SW_REG_R10), r(SW_REG_R8), r(SW_REG_R9)],
            stackPointer: r(SW_REG_RSP), programCounter: r(SW_REG_RIP))
    }

    /// CLOCK_MONOTONIC of the state copied, as a bound that tells it from the thread's own later work: the ptrace
    /// stop as seen by the tracer (the thread runs none of its code from its stop until the detach), the signal
    /// handler's entry, or the look that found the thread blocked in its call; 0 when unknown. A thread that
    /// records a moment `t` in its own code (a loop leaving a stall) was captured before `t` exactly when this is
    /// earlier than `t`.
    var capturedAtNanoseconds: UInt64 = 0
    /// Other frame pointers the stack copy allows, when RBP was recovered from it rather than read
    /// (``BlockedThreadCapture``): the unwind keeps the one that goes furthest.
    var otherFramePointers: [UInt64] = []

    package init(
        threadID: Int32, registers: [UInt64], stackPointer: UInt64, stack: [UInt8], pauseNanoseconds: UInt64,
        handlerNanoseconds: UInt64, stackLow: UInt64 = 0, stackHigh: UInt64 = 0, notes: [String] = [],
        stopWaitNanoseconds: UInt64 = 0
    ) {
        self.threadID = threadID
        self.registers = registers
        self.stackPointer = stackPointer
        self.stack = stack
        self.pauseNanoseconds = pauseNanoseconds
        self.handlerNanoseconds = handlerNanoseconds
        self.stackLow = stackLow
        self.stackHigh = stackHigh
        self.notes = notes
        self.stopWaitNanoseconds = stopWaitNanoseconds
    }

    /// The instruction pointer at capture (`registers[SW_REG_RIP]`), or 0 if the registers are missing.
    var instructionPointer: UInt64 { registers.count == Self.registerCount ? registers[Int(SW_REG_RIP)] : 0 }
}
