// The off-thread unwinder's reads of a stack copy: garbage registers end an unwind, they never crash the process.
import CStallWatchCore
import StallWatchTestSupport
import Testing

@testable import StallWatch

#if canImport(Glibc)
    import Glibc
#endif

@Suite(.offPool) struct UnwinderBoundsTests {
    /// A capture whose frame pointer sits just below 2^64 (a thread caught in code that uses rbp for data, or a
    /// corrupt stack): the frame-chain reads at rbp and rbp + 8 must be refused, not wrapped into the copy.
    @Test(arguments: [UInt64.max - 7, UInt64.max - 15, UInt64.max - 3])
    func aFramePointerNearTheTopOfTheAddressSpaceEndsTheUnwindInsteadOfCrashing(_ framePointer: UInt64) throws {
        let unwinder = try StackUnwinder(processID: getpid())
        let stack = [UInt8](repeating: 0, count: 4096)
        // Somewhere a real stack could be; the copy stands for it.
        let stackPointer: UInt64 = 0x7f00_0000_0000
        var registers = [UInt64](repeating: 0, count: StackCapture.registerCount)
        registers[Int(SW_REG_RBP)] = framePointer
        registers[Int(SW_REG_RSP)] = stackPointer
        // No unwind information at this pc, so libunwind follows the frame chain.
        registers[Int(SW_REG_RIP)] = 0x1000
        let capture = StackCapture(
            threadID: StallWatchTestSupport.currentThreadID(), registers: registers, stackPointer: stackPointer,
            stack: stack, pauseNanoseconds: 0,
            handlerNanoseconds: 0, stackLow: stackPointer - 65536, stackHigh: stackPointer + 4096)
        let unwound = unwinder.unwind(capture, maxFrames: 16)
        #expect(unwound.addresses.first == 0x1000)
        #expect(unwound.addresses.count <= 2, "\(unwound.addresses.map { String($0, radix: 16) })")
    }
}
