// Capture-stage benchmarks (DESIGN §11): loop-thread pause per in-process sample, unwind cost warm vs fresh,
// and the target's pause per ptrace sample.
import CStallWatchCore
import CStallWatchFixtures
import StallWatch
import StallWatchSidecar

#if canImport(Glibc)
    import Glibc
#endif

/// Runs the capture benchmarks and prints one table (about 10–20 s on a 2-core machine).
func runCaptureBenchmarks() {
    print("## Capture (in-process signal copy, libunwind remote unwind, ptrace snapshot)\n")
    print("| what | n | median | p99 | notes |")
    print("|---|---|---|---|---|")
    do {
        try benchmarkSignalCapture()
        try benchmarkPtraceCapture()
    } catch {
        print("| capture benchmarks failed | | | | \(error) |")
    }
    print("")
}

/// A thread spinning at the bottom of a C call chain (the fixture the capture tests use).
private final class ChainThread: @unchecked Sendable {
    // @unchecked Sendable: `sampled` is written before the target's release of chain state 1, read after.
    let chain = UnsafeMutablePointer<sw_test_chain>.allocate(capacity: 1)
    var sampled = SampledThread(threadID: 0, stackLow: 0, stackHigh: 0)
    private var thread = pthread_t()

    init(depth: Int, sampler: SignalSampler) {
        chain.initialize(to: sw_test_chain())
        chain.pointee.depth = Int32(depth)
        let context = Unmanaged.passRetained(Context(owner: self, sampler: sampler)).toOpaque()
        pthread_create(
            &thread, nil,
            { raw in
                let context = Unmanaged<Context>.fromOpaque(raw!).takeRetainedValue()
                context.owner.sampled = context.sampler.registerCurrentThread()
                sw_test_chain_run(context.owner.chain)
                return nil
            }, context)
        while sw_test_chain_state(chain) != 1 { sched_yield() }
    }

    func stop() {
        sw_test_chain_release(chain)
        pthread_join(thread, nil)
        chain.deallocate()
    }

    private final class Context {
        let owner: ChainThread
        let sampler: SignalSampler
        init(owner: ChainThread, sampler: SignalSampler) {
            self.owner = owner
            self.sampler = sampler
        }
    }
}

/// The non-interrupting path on the same spinner, for a side-by-side comparison with the signal rows above.
private func benchmarkHelperCapture(_ thread: SampledThread, count: Int) throws {
    let helper = try ThreadCaptureHelper.shared()
    var pauses: [UInt64] = []
    var roundTrips: [UInt64] = []
    for _ in 0..<count {
        let start = sw_monotonic_ns()
        let capture = try helper.capture(thread, maxStackBytes: 65536, timeoutNanos: 2_000_000_000).get()
        roundTrips.append(sw_monotonic_ns() - start)
        pauses.append(capture.pauseNanoseconds)
    }
    row("in-process pause, ptrace helper interrupt → detach (64-frame spinner)", pauses, "no EINTR, any signal mask")
    row("ptrace helper request → answer (requester's wait)", roundTrips)
}

private func benchmarkSignalCapture() throws {
    let sampler = try SignalSampler.shared()
    let target = ChainThread(depth: 64, sampler: sampler)
    defer { target.stop() }
    let count = 5000
    var captures: [StackCapture] = []
    captures.reserveCapacity(count)
    for _ in 0..<count {
        captures.append(try sampler.capture(target.sampled, timeout: .seconds(2)).get())
    }
    let stackBytes = captures.map { UInt64($0.stack.count) }.sorted()[count / 2]
    row(
        "in-process pause, signal sent → copy done (64-frame spinner)", captures.map(\.pauseNanoseconds),
        "stack copy \(stackBytes) B; bar ≤ 30 µs median")
    row("in-process handler work (registers + stack copy)", captures.map(\.handlerNanoseconds), "bar ≤ 5 µs")
    try benchmarkHelperCapture(target.sampled, count: count)

    let unwinder = try StackUnwinder(processID: getpid())
    _ = unwinder.unwind(captures[0], maxFrames: 256)  // fill the caches once
    var warm: [UInt64] = []
    var frames = 0
    for capture in captures {
        let stack = unwinder.unwind(capture, maxFrames: 256)
        warm.append(stack.unwindNanoseconds)
        frames = stack.addresses.count
    }
    row("unwind of the copy, warm address space", warm, "\(frames) frames; bar ≤ 100 µs")

    var fresh: [UInt64] = []
    var creation: [UInt64] = []
    for capture in captures.prefix(200) {
        let start = sw_monotonic_ns()
        let unwinder = try StackUnwinder(processID: getpid())
        creation.append(sw_monotonic_ns() - start)
        fresh.append(unwinder.unwind(capture, maxFrames: 256).unwindNanoseconds)
    }
    row("unwind of the copy, fresh address space", fresh, "\(frames) frames")
    row("creating an unwinder (address space + _UPT_create)", creation)
}

private func benchmarkPtraceCapture() throws {
    for (label, path, arguments) in [
        ("sleeping", "/bin/sleep", ["60"]), ("busy", "/bin/sh", ["-c", "while :; do :; done"]),
    ] {
        var pid = pid_t()
        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        guard posix_spawn(&pid, path, nil, nil, argv, environ) == 0 else { continue }
        defer {
            kill(pid, SIGKILL)
            var status: Int32 = 0
            waitpid(pid, &status, 0)
        }
        usleep(100_000)  // let exec and the dynamic loader finish; a benchmark, not a test
        let sampler = PtraceSampler(processID: pid)
        let unwinder = try StackUnwinder(processID: pid)
        var pauses: [UInt64] = [], totals: [UInt64] = [], unwinds: [UInt64] = []
        var frames = 0
        for _ in 0..<1500 {
            let start = sw_monotonic_ns()
            let capture = try sampler.capture(threadID: pid, maxStackBytes: 64 << 10).get()
            totals.append(sw_monotonic_ns() - start)
            pauses.append(capture.pauseNanoseconds)
            let stack = unwinder.unwind(capture, maxFrames: 128)
            unwinds.append(stack.unwindNanoseconds)
            frames = stack.addresses.count
        }
        row(
            "ptrace target pause, interrupt → detach (\(label) child)", pauses, "bar ≤ 150 µs median, ≤ 1 ms p99")
        row("ptrace capture call, sidecar side (\(label) child)", totals, "includes maps read, tracer thread")
        row("unwind of the ptrace copy, warm (\(label) child)", unwinds, "\(frames) frames")
    }
}
