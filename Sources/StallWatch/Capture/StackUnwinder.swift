// StackUnwinder: turns a StackCapture into return addresses with libunwind's remote API.
import CStallWatchCore
import CStallWatchUnwind

/// The frames recovered from one capture, innermost first.
package struct UnwoundStack: Sendable {
    /// The program counter at capture, then each caller: return addresses, the Swift async frames recovered from
    /// the async context chain (``AsyncFrameWalker``) and the first frame past a stack switch
    /// (``StackSwitchWalker``), each saying which it is.
    var frames: [UnwoundFrame]
    /// Why unwinding stopped early, if it did (nil when it reached the outermost frame).
    var error: String?
    /// What the unwind could not recover although the stack held it (a Swift job's awaiting callers).
    var notes: [String] = []
    package var unwindNanoseconds: UInt64

    init(frames: [UnwoundFrame], error: String?, unwindNanoseconds: UInt64) {
        self.frames = frames
        self.error = error
        self.unwindNanoseconds = unwindNanoseconds
    }

    /// The frames' addresses.
    package var addresses: [UInt64] { frames.map(\.address) }
}

/// Unwinds copied stacks of one process with libunwind's remote API.
///
/// Stack words come from the capture; code and unwind tables (`.eh_frame`) are read from the process's live
/// memory with `process_vm_readv` (never dereferenced directly, so a library unloaded since the capture yields
/// a truncated stack, not a crash). Reads inside the thread's stack that the copy does not cover are refused.
/// Procedure information comes from libunwind-ptrace (`/proc/PID/maps` and the ELF files; no attach).
///
/// Keep one unwinder per watchdog or sidecar and reuse it: its address space caches unwind information
/// across samples (a fresh one costs 10–20× more per unwind). Not thread-safe; any number may coexist.
package final class StackUnwinder: @unchecked Sendable {
    // @unchecked Sendable: only handed to the one thread that unwinds with it (it is not thread-safe).
    package let processID: Int32
    private let handle: OpaquePointer
    private var asyncWalker: AsyncFrameWalker
    private var switchWalker: StackSwitchWalker

    /// Creates an unwinder for `processID` (this process or another one).
    ///
    /// - Parameter processID: The process whose captures will be unwound.
    /// - Throws: `StallWatchError` `.captureFailed` if libunwind cannot create an address space.
    package init(processID: Int32) throws(StallWatchError) {
        guard let handle = sw_unwinder_create(processID) else {
            throw StallWatchError(
                .captureFailed, "cannot create a libunwind address space for pid \(processID)",
                context: ["pid": String(processID)])
        }
        self.processID = processID
        self.handle = handle
        asyncWalker = AsyncFrameWalker(processID: processID)
        switchWalker = StackSwitchWalker(processID: processID)
    }

    deinit { sw_unwinder_destroy(handle) }

    /// Unwinds `capture`.
    ///
    /// - Parameters:
    ///   - capture: Registers and stack copy from ``SignalSampler``, the capture helper or the sidecar's `PtraceSampler`.
    ///   - maxFrames: The most addresses to return.
    /// - Returns: The frames (innermost first: the PC, then its callers), why unwinding stopped early if it did,
    ///   and how long it took. Partial stacks are normal (a truncated copy, code without unwind
    ///   information) and come back with `error` set.
    package func unwind(_ capture: StackCapture, maxFrames: Int) -> UnwoundStack {
        let start = sw_monotonic_ns()
        guard capture.registers.count == StackCapture.registerCount else {
            return UnwoundStack(
                frames: [],
                error: "capture has \(capture.registers.count) registers, expected \(StackCapture.registerCount)",
                unwindNanoseconds: 0)
        }
        let limit = max(0, maxFrames)
        var result = sw_unwind_result()
        var registers = [sw_unwind_frame](repeating: sw_unwind_frame(), count: limit)
        let addresses = Self.withInput(capture) { input in
            [UInt64](unsafeUninitializedCapacity: limit) { buffer, count in
                count = sw_unwind_frames(handle, &input, buffer.baseAddress, &registers, limit, &result)
            }
        }
        registers.removeSubrange(addresses.count...)
        // libunwind's first frame is the register state itself; each later one a caller's return address.
        var frames = UnwoundFrame.backtrace(addresses)
        let reason = String(cString: result.reason)
        var error: String?
        switch result.stop {
        case SW_UNWIND_COMPLETE: error = nil
        case SW_UNWIND_MAX_FRAMES: error = "stopped at maxFrames (\(limit))"
        case SW_UNWIND_INIT_FAILED: error = "unw_init_remote failed: \(reason)"
        case SW_UNWIND_STEP_FAILED: error = "unw_step failed after \(addresses.count) frames: \(reason)"
        default: error = "\(reason) after \(addresses.count) frames"
        }
        // Past a runtime's stack switch, the CFI unwind's frames are guesses: the walk of the other stack replaces them.
        if let switched = switchWalker.continueAcrossSwitch(
            frames: frames, registers: registers, capture: capture, maxFrames: limit)
        {
            frames = switched.frames
            registers = switched.registers
            error = switched.error
        }
        let walked = asyncWalker.insertAsyncFrames(
            into: frames, registers: registers, capture: capture, maxFrames: limit)
        if walked.contains(where: { if case .asyncResumePoint = $0 { true } else { false } }) {
            // Async frames are only inserted at a Swift job's frame, which a stack switch of another runtime never
            // precedes: a switch seen with them is none.
            frames = walked.map { frame in
                if case .stackSwitch(let address) = frame { return .returnAddress(address) }
                return frame
            }
        }
        var stack = UnwoundStack(frames: frames, error: error, unwindNanoseconds: sw_monotonic_ns() - start)
        if let miss = asyncWalker.lastMiss { stack.notes.append(miss) }
        return stack
    }

    /// The return address of the innermost frame of `capture`, found by its unwind tables alone (one step, no
    /// walk of async frames or stack switches); nil when the step fails (no unwind information, a read the copy
    /// does not cover).
    package func caller(of capture: StackCapture) -> UInt64? {
        guard capture.registers.count == StackCapture.registerCount else { return nil }
        var result = sw_unwind_result()
        var addresses: [UInt64] = [0, 0]
        let count = Self.withInput(capture) { sw_unwind(handle, &$0, &addresses, 2, &result) }
        return count == 2 && addresses[1] != 0 ? addresses[1] : nil
    }

    /// Runs `body` with `capture` as the C unwinder's input (pointers valid only inside it).
    private static func withInput<Result>(
        _ capture: StackCapture, _ body: (inout sw_unwind_input) -> Result
    ) -> Result {
        capture.registers.withUnsafeBufferPointer { captured in
            capture.stack.withUnsafeBufferPointer { stack in
                var input = sw_unwind_input(
                    registers: captured.baseAddress, stack_pointer: capture.stackPointer,
                    stack: stack.baseAddress, stack_size: stack.count, stack_low: capture.stackLow,
                    stack_high: capture.stackHigh)
                return body(&input)
            }
        }
    }

    /// Forgets cached unwind information, for example after the process unloaded libraries (`dlclose`), whose
    /// addresses a newly loaded library may reuse.
    func flushCaches() {
        sw_unwinder_flush(handle)
        switchWalker.flush()
    }
}
