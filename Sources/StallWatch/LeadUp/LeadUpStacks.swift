// LeadUpStacks: the loop thread's stacks over the lead-up, from a kernel-kept ring or, failing that, low-rate samples.
import CStallWatchCore
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// One stack of the loop thread in the lead-up: when it was taken (CLOCK_MONOTONIC) and its frames, innermost first.
package struct LeadUpStackSample: Sendable, Equatable {
    package var timeNanos: UInt64
    package var frames: [UnwoundFrame]
    /// A kernel sample's registers and stack words, kept until ``LeadUpStacks/resolvingLeaves(_:)`` finds the caller
    /// the frame-pointer chain may have skipped (nil once done, or when the sample carries none).
    var leaf: Leaf?

    /// The user RBP, RSP and RIP of a kernel sample and the stack bytes above RSP.
    struct Leaf: Sendable, Equatable {
        var framePointer: UInt64
        var stackPointer: UInt64
        var instructionPointer: UInt64
        var stack: [UInt8]

        /// The innermost frame as a capture for the unwinder, bounded around the copy so that it refuses any other
        /// read of the stack (the live one has moved on since the sample) rather than reading what is there now.
        var capture: StackCapture {
            var registers = [UInt64](repeating: 0, count: StackCapture.registerCount)
            registers[Int(SW_REG_RBP)] = framePointer
            registers[Int(SW_REG_RSP)] = stackPointer
            registers[Int(SW_REG_RIP)] = instructionPointer
            return StackCapture(
                threadID: 0, registers: registers, stackPointer: stackPointer, stack: stack, pauseNanoseconds: 0,
                handlerNanoseconds: 0, stackLow: stackPointer &- (1 << 20), stackHigh: stackPointer &+ (1 << 26))
        }
    }

    package init(timeNanos: UInt64, frames: [UnwoundFrame]) {
        self.timeNanos = timeNanos
        self.frames = frames
    }
}

/// How a lead-up's stacks were taken, and why there are none when there are none.
package struct LeadUpStackOrigin: Sendable, Equatable {
    package enum Method: String, Sendable, Codable {
        /// The kernel's ring: perf's software task clock of the loop thread (``LeadUpStacks/perfPeriodNanos`` of
        /// its CPU time between samples).
        case perfClock = "perf-clock"
        /// StallWatch's own sampler, about once a bucket while the loop was busy.
        case sampler
    }
    package var method: Method?
    /// Time between samples: CPU time of the loop thread for `perf-clock`, wall time while busy for `sampler`.
    package var intervalNanos: UInt64
    /// Why the kernel's ring is not used (or nothing is), when it is not.
    package var note: String?
}

/// The loop thread's stacks over the lead-up window.
///
/// With ``LeadUpStackMode/auto`` the first tick that knows the loop thread opens a perf ring for it
/// (`sw_perf_ring_open`): the kernel then records the thread's user stack every ``perfPeriodNanos`` of its CPU time
/// into a read-only overwrite ring of ``perfDataPages`` pages — no signal, no stop, nothing on the loop's path.
/// Where the kernel refuses (`perf_event_paranoid` 3, a seccomp filter, the locked-memory budget spent), and with
/// ``LeadUpStackMode/sampler``, the watching thread samples the loop thread itself through the stall sampler, at
/// most once per bucket while the loop is busy, into a ring of ``sampleCapacity`` stacks.
///
/// ``samples(from:to:)`` may run on any thread; the rest on the watching thread.
package final class LeadUpStacks: Sendable {
    /// CPU time of the loop thread between two perf samples: 10 ms (100 a second while it runs).
    package static let perfPeriodNanos: UInt64 = 10_000_000
    /// 64 pages (256 KiB): ten seconds of a busy loop at 100 samples a second, stacks of about 30 frames.
    static let perfDataPages: UInt32 = 64
    /// Frames the kernel records per perf sample.
    static let perfMaxFrames: UInt16 = 64
    /// Bytes of user stack above the stack pointer each perf sample carries, with RBP, RSP and RIP: what one step
    /// of the unwind tables needs to find the innermost frame's caller, which the frame-pointer chain skips when
    /// the sample hit a function without a frame of its own, or a prologue or epilogue (a frame's return address
    /// lies within the first words above the stack pointer there).
    static let perfLeafStackBytes: UInt32 = 128
    /// The sampler's ring: 20 seconds at one sample per 100 ms bucket.
    static let sampleCapacity = 200

    private struct State: ~Copyable {
        var ring = sw_perf_ring(fd: -1, base: nil, map_size: 0, data_size: 0, leaf_stack_bytes: 0)
        /// The thread the ring samples (0: none open).
        var ringThread: Int32 = 0
        var origin: LeadUpStackOrigin
        var samples: [LeadUpStackSample] = []
        var nextSample = 0
        var lastSampleNanos: UInt64 = 0
        var closed = false
    }
    private let state: Mutex<State>
    /// Finds the innermost frames' callers in the ring's samples (made on first use; nil if it cannot be), apart
    /// from `state` so that the watching thread's ticks never wait for it.
    private let leafUnwinder = Mutex<(unwinder: StackUnwinder?, failed: Bool)>((nil, false))
    let mode: LeadUpStackMode
    /// The sampler's interval: one bucket.
    let samplerIntervalNanos: UInt64

    package init(mode: LeadUpStackMode, bucketNanos: UInt64) {
        self.mode = mode
        samplerIntervalNanos = bucketNanos
        let origin: LeadUpStackOrigin
        switch mode {
        case .auto: origin = .init(method: nil, intervalNanos: Self.perfPeriodNanos, note: nil)
        case .sampler:
            origin = .init(
                method: .sampler, intervalNanos: bucketNanos, note: "the sampler was asked for (leadUpStacks)")
        case .off: origin = .init(method: nil, intervalNanos: 0, note: "stacks are off (leadUpStacks)")
        }
        state = Mutex(State(origin: origin))
    }

    deinit { close() }

    /// How the stacks are taken now.
    package var origin: LeadUpStackOrigin { state.withLock { $0.origin } }

    /// Opens the kernel's ring for `threadID` when that is the mode and none is open for it yet. On the watching
    /// thread.
    package func attach(threadID: Int32) {
        guard mode == .auto else { return }
        state.withLock { state in
            guard !state.closed, state.ringThread != threadID, state.origin.method != .sampler else { return }
            sw_perf_ring_close(&state.ring)
            state.ringThread = 0
            let status = sw_perf_ring_open(
                &state.ring, threadID, Self.perfPeriodNanos, Self.perfDataPages, Self.perfMaxFrames,
                Self.perfLeafStackBytes)
            if status == 0 {
                state.ringThread = threadID
                state.origin = .init(method: .perfClock, intervalNanos: Self.perfPeriodNanos, note: nil)
            } else {
                state.origin = .init(
                    method: .sampler, intervalNanos: samplerIntervalNanos,
                    note: "the kernel refused a perf ring for the loop thread (perf_event_open: "
                        + "\(String(cString: strerror(-status)))): sampled by StallWatch once a bucket while busy")
            }
        }
    }

    /// Whether the watching thread should take a sample now (the sampler's mode, one per interval).
    package func wantsSample(now: UInt64) -> Bool {
        state.withLock { state in
            !state.closed && state.origin.method == .sampler
                && now &- state.lastSampleNanos >= samplerIntervalNanos
        }
    }

    /// Keeps a sample the watching thread took at `now`.
    package func record(_ frames: [UnwoundFrame], at now: UInt64) {
        state.withLock { state in
            state.lastSampleNanos = now
            guard !frames.isEmpty else { return }
            let sample = LeadUpStackSample(timeNanos: now, frames: frames)
            if state.samples.count < Self.sampleCapacity {
                state.samples.append(sample)
            } else {
                state.samples[state.nextSample] = sample
            }
            state.nextSample = (state.nextSample + 1) % Self.sampleCapacity
        }
    }

    /// The stacks taken between `from` and `to` (CLOCK_MONOTONIC), oldest first. Cheap (a copy of the ring, run at
    /// a stall's detection before its first sample): the kernel's samples come with their ``LeadUpStackSample/leaf``
    /// state, for ``resolvingLeaves(_:)`` later, off the watching thread.
    package func samples(from: UInt64, to: UInt64) -> [LeadUpStackSample] {
        state.withLock { state -> [LeadUpStackSample] in
            var found = state.samples.filter { $0.timeNanos >= from && $0.timeNanos <= to }
            if state.ringThread != 0 {
                found += Self.read(&state.ring).filter { $0.timeNanos >= from && $0.timeNanos <= to }
            }
            return found.sorted { $0.timeNanos < $1.timeNanos }
        }
    }

    /// `samples` with the caller each kernel sample's frame-pointer chain skipped put back (``resolving(_:caller:)``)
    /// by one step of the unwind tables; a few microseconds a sample, so for the report's builder, not the watcher.
    package func resolvingLeaves(_ samples: [LeadUpStackSample]) -> [LeadUpStackSample] {
        guard samples.contains(where: { $0.leaf != nil }) else { return samples }
        return leafUnwinder.withLock { state in
            if state.unwinder == nil, !state.failed {
                state.unwinder = try? StackUnwinder(processID: getpid())
                state.failed = state.unwinder == nil
            }
            guard let unwinder = state.unwinder else { return Self.resolving(samples) { _ in nil } }
            return Self.resolving(samples) { unwinder.caller(of: $0) }
        }
    }

    /// The frame-pointer chain's first caller is the return address RBP points at; a sample that hit a function
    /// without a frame of its own, or a prologue or epilogue, is still in its caller's frame there, and the chain
    /// skips the caller. `caller` finds that caller from a sample's registers and stack words; when it differs from
    /// the chain's first caller it is put before it. Every ``LeadUpStackSample/leaf`` is dropped.
    static func resolving(
        _ samples: [LeadUpStackSample], caller: (StackCapture) -> UInt64?
    ) -> [LeadUpStackSample] {
        samples.map { sample in
            var resolved = sample
            resolved.leaf = nil
            guard let leaf = sample.leaf, sample.frames.first?.address == leaf.instructionPointer,
                let found = caller(leaf.capture)
            else { return resolved }
            if sample.frames.count < 2 || sample.frames[1].address != found {
                resolved.frames.insert(.returnAddress(found), at: 1)
            }
            return resolved
        }
    }

    /// Closes the kernel's ring (the watching stops); later samples are none.
    package func close() {
        state.withLock { state in
            sw_perf_ring_close(&state.ring)
            state.ringThread = 0
            state.closed = true
        }
    }

    /// The samples in the kernel's ring, newest first.
    private static func read(_ ring: inout sw_perf_ring) -> [LeadUpStackSample] {
        let capacity = ring.data_size
        guard capacity > 0 else { return [] }
        let leafStackBytes = Int(ring.leaf_stack_bytes)
        return [UInt8](unsafeUninitializedCapacity: capacity) { buffer, count in
            count = sw_perf_ring_copy(&ring, buffer.baseAddress, capacity)
        }.withUnsafeBytes { parse($0, leafStackBytes: leafStackBytes) }
    }

    /// `PERF_RECORD_SAMPLE`.
    private static let sampleRecord: UInt32 = 9
    /// Call chain entries at or above this are context markers (`PERF_CONTEXT_MAX`, -4095), not addresses.
    private static let contextMarkers: UInt64 = 0xffff_ffff_ffff_f001

    /// Parses records as `sw_perf_ring_copy` gives them: header (u32 type, u16 misc, u16 size), then for a sample
    /// u32 pid, u32 tid, u64 time, u64 nr, nr u64 entries, and in a ring with `leafStackBytes` the user registers
    /// (u64 abi, then RBP, RSP, RIP unless it is 0) and stack (u64 size, its bytes, u64 bytes filled), kept as the
    /// sample's ``LeadUpStackSample/leaf`` when its chain starts at that RIP.
    static func parse(_ bytes: UnsafeRawBufferPointer, leafStackBytes: Int = 0) -> [LeadUpStackSample] {
        var samples: [LeadUpStackSample] = []
        var at = 0
        while at + 8 <= bytes.count {
            let type = bytes.loadUnaligned(fromByteOffset: at, as: UInt32.self)
            let size = Int(bytes.loadUnaligned(fromByteOffset: at + 6, as: UInt16.self))
            guard size >= 8, at + size <= bytes.count else { break }
            defer { at += size }
            guard type == sampleRecord, size >= 32 else { continue }
            let time = bytes.loadUnaligned(fromByteOffset: at + 16, as: UInt64.self)
            let count = Int(min(bytes.loadUnaligned(fromByteOffset: at + 24, as: UInt64.self), UInt64(size / 8)))
            guard 32 + count * 8 <= size else { continue }
            var addresses: [UInt64] = []
            addresses.reserveCapacity(count + 1)
            for index in 0..<count {
                let entry = bytes.loadUnaligned(fromByteOffset: at + 32 + index * 8, as: UInt64.self)
                if entry < contextMarkers && entry != 0 { addresses.append(entry) }
            }
            if !addresses.isEmpty {
                var sample = LeadUpStackSample(timeNanos: time, frames: UnwoundFrame.backtrace(addresses))
                if leafStackBytes > 0, let leaf = leafState(bytes, from: at + 32 + count * 8, to: at + size),
                    addresses.first == leaf.instructionPointer
                {
                    sample.leaf = leaf
                }
                samples.append(sample)
            }
        }
        return samples
    }

    /// The registers and stack words of a sample whose call chain ends at `from` (its record at `to`); nil when the
    /// sample has none or the record is short.
    private static func leafState(
        _ bytes: UnsafeRawBufferPointer, from: Int, to end: Int
    ) -> LeadUpStackSample.Leaf? {
        func word(_ offset: Int) -> UInt64 { bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self) }
        var at = from
        guard at + 8 <= end, word(at) != 0, at + 32 <= end else { return nil }
        let framePointer = word(at + 8), stackPointer = word(at + 16), instructionPointer = word(at + 24)
        at += 32
        guard at + 8 <= end else { return nil }
        let size = Int(clamping: word(at))
        at += 8
        guard size > 0, size <= end - at - 8 else { return nil }
        let filled = min(size, Int(clamping: word(at + size)))
        return LeadUpStackSample.Leaf(
            framePointer: framePointer, stackPointer: stackPointer, instructionPointer: instructionPointer,
            stack: Array(UnsafeRawBufferPointer(rebasing: bytes[at..<(at + filled)])))
    }
}
