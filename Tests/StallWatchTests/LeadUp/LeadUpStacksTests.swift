// The lead-up's stacks: the kernel's ring read back, a refused ring falling back to the sampler, damaged records.
import CStallWatchCore
import Foundation
import Synchronization
import Testing

@testable import StallWatch

@Suite struct LeadUpStacksTests {
    /// A thread that spins in a function of its own until told to stop: in its own code, or (`callingATinyFunction`)
    /// only calling a tiny function, so that many of the kernel's samples land in the callee's prologue or epilogue,
    /// where the frame-pointer chain skips the caller.
    final class SpinningThread: @unchecked Sendable {
        let threadID = Atomic<Int32>(0)
        let stop = Atomic<Bool>(false)
        let done = DispatchSemaphore(value: 0)
        let callingATinyFunction: Bool

        init(callingATinyFunction: Bool = false) { self.callingATinyFunction = callingATinyFunction }

        @inline(never) static func tinyStep(_ x: UInt64) -> UInt64 { x &* 6_364_136_223_846_793_005 &+ 1 }

        @inline(never) func spinInLeadUpStacksTest() {
            var x: UInt64 = 1
            while !stop.load(ordering: .relaxed) { x = x &* 6_364_136_223_846_793_005 &+ 1 }
            precondition(x != 0)
        }

        @inline(never) func callTinyStepsInLeadUpStacksTest() {
            var x: UInt64 = 1
            while !stop.load(ordering: .relaxed) { x = Self.tinyStep(x) }
            precondition(x != 0)
        }

        func start() {
            Thread.detachNewThread { [self] in
                threadID.store(sw_gettid(), ordering: .releasing)
                if callingATinyFunction { callTinyStepsInLeadUpStacksTest() } else { spinInLeadUpStacksTest() }
                done.signal()
            }
            while threadID.load(ordering: .acquiring) == 0 { sched_yield() }
        }
    }

    @Test func theKernelsRingHoldsTheThreadsStacksInTimeOrderWithinTheAskedSpan() throws {
        let stacks = LeadUpStacks(mode: .auto, bucketNanos: 100_000_000)
        defer { stacks.close() }
        let thread = SpinningThread()
        thread.start()
        let from = sw_monotonic_ns()
        stacks.attach(threadID: thread.threadID.load(ordering: .acquiring))
        #expect(stacks.origin.method == .perfClock, "\(stacks.origin)")
        // Spins until the kernel has taken 10 samples (10 ms of the thread's CPU time each), bounded at 30 s.
        var samples: [LeadUpStackSample] = []
        let deadline = from + 30_000_000_000
        while samples.count < 10 && sw_monotonic_ns() < deadline {
            usleep(20_000)
            samples = stacks.samples(from: from, to: sw_monotonic_ns())
        }
        thread.stop.store(true, ordering: .relaxed)
        thread.done.wait()
        #expect(samples.count >= 10)
        #expect(samples.map(\.timeNanos) == samples.map(\.timeNanos).sorted())
        let symbolicator = Symbolicator(processID: getpid(), mode: .fast)
        let named = samples.filter { sample in
            symbolicator.symbolicate(sample.frames).contains { $0.symbol?.contains("spinInLeadUpStacksTest") == true }
        }
        #expect(named.count == samples.count, "\(samples.count - named.count) samples outside the spinning function")
        // A span before the thread ran holds none of them.
        #expect(stacks.samples(from: 0, to: from - 1).isEmpty)
    }

    @Test func aRingTheKernelRefusesLeavesTheSamplerWithTheReason() {
        let stacks = LeadUpStacks(mode: .auto, bucketNanos: 100_000_000)
        // No thread has this id: perf_event_open fails (ESRCH), as it would for a forbidden one.
        stacks.attach(threadID: Int32.max)
        #expect(stacks.origin.method == .sampler)
        #expect(stacks.origin.note?.contains("perf_event_open") == true, "\(stacks.origin)")
        #expect(stacks.wantsSample(now: sw_monotonic_ns()))
        stacks.record([.programCounter(0x1000)], at: 5_000)
        #expect(!stacks.wantsSample(now: 5_000 + 99_000_000))
        #expect(stacks.wantsSample(now: 5_000 + 100_000_000))
        #expect(stacks.samples(from: 0, to: 10_000).map(\.timeNanos) == [5_000])
    }

    @Test func theSamplersRingKeepsTheLatestStacks() {
        let stacks = LeadUpStacks(mode: .sampler, bucketNanos: 100)
        for time in 1...UInt64(LeadUpStacks.sampleCapacity + 50) {
            stacks.record([.programCounter(time)], at: time * 100)
        }
        let kept = stacks.samples(from: 0, to: .max)
        #expect(kept.count == LeadUpStacks.sampleCapacity)
        #expect(kept.first?.timeNanos == 51 * 100)
        #expect(kept.last?.timeNanos == UInt64(LeadUpStacks.sampleCapacity + 50) * 100)
    }

    /// One record as the kernel writes it: header, then the sample's fields, and for a ring with user registers and
    /// stack, `leaf`: the registers' ABI word, RBP, RSP, RIP (left out when the ABI word is 0) and the stack words.
    static func record(
        type: UInt32 = 9, size: UInt16? = nil, time: UInt64, chain: [UInt64],
        leaf: (abi: UInt64, registers: [UInt64], stack: [UInt64])? = nil
    ) -> [UInt8] {
        var fields: [UInt64] = [0, time, UInt64(chain.count)] + chain  // pid/tid word, time, nr, entries
        if let leaf {
            fields += [leaf.abi] + (leaf.abi == 0 ? [] : leaf.registers)
            fields +=
                [UInt64(leaf.stack.count * 8)] + leaf.stack + (leaf.stack.isEmpty ? [] : [UInt64(leaf.stack.count * 8)])
        }
        let length = UInt16(8 + fields.count * 8)
        var bytes: [UInt8] = []
        withUnsafeBytes(of: type.littleEndian) { bytes += $0 }
        withUnsafeBytes(of: UInt16(0)) { bytes += $0 }
        withUnsafeBytes(of: (size ?? length).littleEndian) { bytes += $0 }
        fields.withUnsafeMutableBytes { bytes += $0 }
        return bytes
    }

    @Test func parsingDropsContextMarkersAndStopsAtADamagedRecord() {
        let user: UInt64 = 0xffff_ffff_ffff_fe00  // PERF_CONTEXT_USER
        var bytes = Self.record(time: 30, chain: [user, 0x4000, 0x5000])
        bytes += Self.record(type: 2, time: 20, chain: [0x1])  // not a sample: skipped
        bytes += Self.record(time: 10, chain: [user, 0x6000])
        bytes += Self.record(size: 4, time: 5, chain: [0x7000])  // a size shorter than a header: the end
        bytes += Self.record(time: 1, chain: [0x8000])
        let samples = bytes.withUnsafeBytes { LeadUpStacks.parse($0) }
        #expect(samples.map(\.timeNanos) == [30, 10])
        #expect(samples.first?.frames == [.programCounter(0x4000), .returnAddress(0x5000)])
        // A chain count past the record's end is not read beyond it.
        var lying = Self.record(time: 40, chain: [0x4000])
        lying.replaceSubrange(24..<32, with: [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f])
        #expect(lying.withUnsafeBytes { LeadUpStacks.parse($0) }.isEmpty)
    }

    /// A sample's registers and stack words reach the leaf's caller finder as a capture at that stack pointer; the
    /// caller it finds goes before the chain's first caller when it differs, and nothing changes when it is the
    /// same, when it finds none, when the chain does not start at the sampled instruction, or without registers.
    @Test func aCallerTheFrameChainSkippedIsPutBackFromTheSamplesRegistersAndStack() {
        let registers: [UInt64] = [0x7000_0100, 0x7000_0000, 0x4010]  // RBP, RSP, RIP
        let stack: [UInt64] = [0x5555, 0x6666]
        let seen = Mutex<[(sp: UInt64, pc: UInt64, bytes: Int, words: [UInt64])]>([])
        func parse(_ record: [UInt8], finding caller: UInt64?) -> [UnwoundFrame]? {
            let parsed = record.withUnsafeBytes { LeadUpStacks.parse($0, leafStackBytes: 16) }
            let resolved = LeadUpStacks.resolving(parsed) { capture in
                let words = capture.stack.withUnsafeBytes { Array($0.bindMemory(to: UInt64.self)) }
                seen.withLock {
                    $0.append((capture.stackPointer, capture.instructionPointer, capture.stack.count, words))
                }
                return caller
            }
            #expect(resolved.allSatisfy { $0.leaf == nil })
            return resolved.first?.frames
        }
        let skipped = Self.record(time: 1, chain: [0x4010, 0x3000], leaf: (2, registers, stack))
        #expect(
            parse(skipped, finding: 0x2000) == [
                .programCounter(0x4010), .returnAddress(0x2000), .returnAddress(0x3000),
            ])
        let call = seen.withLock { $0.last }
        #expect(call?.sp == 0x7000_0000 && call?.pc == 0x4010 && call?.bytes == 16 && call?.words == stack)
        #expect(parse(skipped, finding: 0x3000) == [.programCounter(0x4010), .returnAddress(0x3000)])
        #expect(parse(skipped, finding: nil) == [.programCounter(0x4010), .returnAddress(0x3000)])
        let elsewhere = Self.record(time: 1, chain: [0x4020, 0x3000], leaf: (2, registers, stack))
        #expect(parse(elsewhere, finding: 0x2000) == [.programCounter(0x4020), .returnAddress(0x3000)])
        let calls = seen.withLock { $0.count }
        let noRegisters = Self.record(time: 1, chain: [0x4010, 0x3000], leaf: (0, [], stack))
        #expect(parse(noRegisters, finding: 0x2000) == [.programCounter(0x4010), .returnAddress(0x3000)])
        #expect(seen.withLock { $0.count } == calls)
    }

    @Test func everySampleOfAThreadCallingATinyFunctionNamesTheCaller() throws {
        let stacks = LeadUpStacks(mode: .auto, bucketNanos: 100_000_000)
        defer { stacks.close() }
        let thread = SpinningThread(callingATinyFunction: true)
        thread.start()
        let from = sw_monotonic_ns()
        stacks.attach(threadID: thread.threadID.load(ordering: .acquiring))
        #expect(stacks.origin.method == .perfClock, "\(stacks.origin)")
        // 50 samples (10 ms of the thread's CPU time each), bounded at 60 s.
        var samples: [LeadUpStackSample] = []
        let deadline = from + 60_000_000_000
        while samples.count < 50 && sw_monotonic_ns() < deadline {
            usleep(50_000)
            samples = stacks.samples(from: from, to: sw_monotonic_ns())
        }
        thread.stop.store(true, ordering: .relaxed)
        thread.done.wait()
        #expect(samples.count >= 50)
        // Taken cheaply with their registers and stack words; the callers are found afterwards.
        #expect(samples.allSatisfy { $0.leaf != nil })
        samples = stacks.resolvingLeaves(samples)
        let symbolicator = Symbolicator(processID: getpid(), mode: .fast)
        let missing = samples.map { symbolicator.symbolicate($0.frames).map { $0.symbol ?? "?" } }.filter { symbols in
            !symbols.contains { $0.contains("callTinyStepsInLeadUpStacksTest") }
        }
        #expect(
            missing.isEmpty, "\(missing.count) of \(samples.count) samples without the caller: \(missing.prefix(3))")
    }

    /// The stacks' work waits for a tick whose detector look is far enough away: opening the ring (or a sampler's
    /// sample) never runs into the look.
    @Test func theRingIsOpenedOnlyInATickWhoseDetectorLookIsFarEnoughAway() throws {
        let loop = try EventLoop(name: "stack-margin", mainQueue: .disabled)
        defer { loop.state.stopLeadUp() }
        let ring = try #require(loop.state.startLeadUp(StallWatchConfiguration().leadUpSettings))
        let recorder = LeadUpRecorder(ring: ring, stacks: .auto)
        defer { recorder.stacks?.close() }
        let stacks = try #require(recorder.stacks)
        let thread = sw_gettid()
        let now = sw_monotonic_ns()
        _ = recorder.tick(
            now: now, threadID: thread, sequence: 1, isBusy: true,
            lookDue: now + LeadUpRecorder.stackWorkMarginNanos - 1)
        #expect(stacks.origin.method == nil, "opened with the look \(LeadUpRecorder.stackWorkMarginNanos - 1) ns away")
        _ = recorder.tick(now: now, threadID: thread, sequence: 1, isBusy: true, lookDue: now - 1)
        #expect(stacks.origin.method == nil, "opened with the look overdue")
        _ = recorder.tick(
            now: now, threadID: thread, sequence: 1, isBusy: true, lookDue: now + LeadUpRecorder.stackWorkMarginNanos)
        #expect(stacks.origin.method == .perfClock)
    }
}
