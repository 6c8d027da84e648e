// PoolWorkerStackSampling: samples a Concurrency pool worker by signal when it can answer one, else says why not.

/// Samples pool workers through the in-process signal path. libdispatch's workers block every signal, so a
/// signal could never be answered (and would stay pending on the thread): such a sample records a capture
/// error instead, and the worker's /proc state still classifies the stall. A non-interrupting capture
/// (ptrace from a helper) plugs in here as another ``StackSampling``.
final class PoolWorkerStackSampling: StackSampling, @unchecked Sendable {  // Used by the pool watchdog's thread.
    static let blockedSignalError =
        "the pool worker blocks all signals: its stack needs a non-interrupting capture, which is not available"
    let captureMethod = "signal"
    private let inner: SignalStackSampling?
    private let signal: Int32

    init(inner: SignalStackSampling?, signal: Int32) {
        self.inner = inner
        self.signal = signal
    }

    func sample(_ thread: SampledThread, configuration: StallWatchConfiguration) -> StackSample {
        guard let inner else { return StackSample(error: "in-process sampling is unavailable") }
        if ThreadStackLocator.blocks(thread.threadID, signal: signal) {
            return StackSample(error: Self.blockedSignalError, failure: Self.blockedSignalError)
        }
        var full = configuration
        full.maxThreadFrames = configuration.maxFrames
        return inner.sampleThread(id: thread.threadID, configuration: full)
    }

    func sampleThread(id: Int32, configuration: StallWatchConfiguration) -> StackSample {
        guard let inner else { return StackSample(error: "in-process sampling is unavailable") }
        return inner.sampleThread(id: id, configuration: configuration)
    }
}
