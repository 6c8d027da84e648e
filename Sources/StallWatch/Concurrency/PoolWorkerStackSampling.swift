// PoolWorkerStackSampling: samples Concurrency pool workers without interrupting them, async frames included.
import CStallWatchConcurrency

#if canImport(Glibc)
    import Glibc
#endif

/// Samples pool workers through the in-process path that never interrupts them (``InProcessStackSampling``: a
/// ptrace stop by the capture helper, so a worker blocked in `usleep`, a futex or `read` sees no EINTR).
/// libdispatch's workers block every signal, so where ptrace is refused the signal fallback cannot reach them: such
/// a sample records why instead, and the worker's /proc state still classifies the stall.
///
/// The unwinder appends the Swift async frames above the job's partial function (``AsyncFrameWalker``), so a sample
/// shows the blocking call, the async function that made it, and the functions awaiting it.
final class PoolWorkerStackSampling: StackSampling, @unchecked Sendable {  // Used by the pool watchdog's thread.
    private let inner: (any StackSampling)?
    private let setupError: String?

    init(inner: (any StackSampling)?, setupError: String?) {
        self.inner = inner
        self.setupError = setupError
    }

    var captureMethod: CaptureMethod { inner?.captureMethod ?? .none }

    /// A sample of the stuck worker, with the loop's full frame budget.
    func sample(_ thread: SampledThread, configuration: StallWatchConfiguration) -> StackSample {
        guard let inner else {
            let error = setupError ?? "in-process sampling is unavailable"
            return StackSample(error: error, failure: error)
        }
        return inner.sample(thread, configuration: configuration)
    }

    func sampleThread(id: Int32, configuration: StallWatchConfiguration) -> StackSample {
        guard let inner else { return StackSample(error: setupError ?? "in-process sampling is unavailable") }
        return inner.sampleThread(id: id, configuration: configuration)
    }

    func beginThreadSnapshot() { inner?.beginThreadSnapshot() }

    /// The stacks of a saturation's workers, symbolicated, one per worker in order (frames, or why there are none).
    ///
    /// A worker that did not stop in time was runnable (waiting for a CPU on a busy machine: its job just started,
    /// it has yet to reach the call that blocks it) or working inside the kernel; it is tried once more after every
    /// other worker, which gave it that time to get a CPU, and keeps the first try's reason if that fails too.
    func workerStacks(
        _ threadIDs: [Int32], configuration: StallWatchConfiguration, symbolicator: Symbolicator
    ) -> [(frames: [StackFrame], error: String?)] {
        let take = { (id: Int32) in
            self.sample(SampledThread(threadID: id, stackLow: 0, stackHigh: 0), configuration: configuration)
        }
        var taken = threadIDs.map(take)
        for index in taken.indices where taken[index].frames.isEmpty && taken[index].timedOut {
            let again = take(threadIDs[index])
            if !again.frames.isEmpty { taken[index] = again }
        }
        return taken.map { taken in
            let frames = symbolicator.symbolicate(taken.frames)
            return (frames, frames.isEmpty ? (taken.error ?? "stack not captured") : taken.error)
        }
    }
}

extension StallRecorder.Target {
    /// This process's Concurrency pool workers, sampled without interrupting them.
    static func concurrencyPool() -> Self {
        var target = Self.inProcess()
        target.sampler = PoolWorkerStackSampling(inner: target.sampler, setupError: target.setupErrors.last)
        target.detectionSource = .concurrencyPool
        return target
    }
}
