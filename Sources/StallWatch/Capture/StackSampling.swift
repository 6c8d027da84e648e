// StackSampling: how a StallRecorder gets one stack sample of the stuck thread (signal in-process, ptrace outside).
import CStallWatch

#if canImport(Glibc)
import Glibc
#endif

/// One sample's outcome: the return addresses (innermost first) and what it cost the target.
public struct StackSample: Sendable {
    public var addresses: [UInt64] = []
    /// How long the sampled thread was held (signal handler or ptrace stop), nanoseconds.
    public var pauseNanos: UInt64?
    /// Unwinding the copied stack, nanoseconds.
    public var unwindNanos: UInt64?
    /// Why this sample has no (or too few) frames; lands in the report's sample.
    public var error: String?
    /// A capture failure worth listing in the report's `capture.errors`.
    public var failure: String?

    public init(
        addresses: [UInt64] = [], pauseNanos: UInt64? = nil, unwindNanos: UInt64? = nil, error: String? = nil,
        failure: String? = nil
    ) {
        self.addresses = addresses
        self.pauseNanos = pauseNanos
        self.unwindNanos = unwindNanos
        self.error = error
        self.failure = failure
    }
}

/// Takes a stack sample of one thread of the watched process. Called on the recorder's thread only.
public protocol StackSampling: AnyObject, Sendable {
    /// `signal` (in-process) or `ptrace` (sidecar): the report's `capture.method`.
    var captureMethod: String { get }
    /// Captures and unwinds `thread`'s stack now; problems are recorded in the result, never thrown.
    func sample(_ thread: SampledThread, configuration: StallWatchConfiguration) -> StackSample
}

/// In-process sampling: a real-time signal to the loop thread copies its stack; the copy is unwound here.
final class SignalStackSampling: StackSampling, @unchecked Sendable {  // Used by one watchdog thread.
    let captureMethod = "signal"
    private let sampler: SignalSampler
    private let unwinder: StackUnwinder

    init(sampler: SignalSampler, unwinder: StackUnwinder) {
        self.sampler = sampler
        self.unwinder = unwinder
    }

    func sample(_ thread: SampledThread, configuration: StallWatchConfiguration) -> StackSample {
        switch sampler.capture(thread, timeout: .milliseconds(configuration.captureTimeoutMs)) {
        case .success(let capture):
            let stack = unwinder.unwind(capture, maxFrames: configuration.maxFrames)
            var result = StackSample(
                addresses: stack.addresses, pauseNanos: capture.pauseNanoseconds, unwindNanos: stack.unwindNanoseconds)
            if let error = stack.error, stack.addresses.count < 2 { result.error = error }
            return result
        case .failure(let error):
            return StackSample(error: error.message, failure: error.message)
        }
    }
}
