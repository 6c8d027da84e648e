// Placeholder API of the in-process sampler (filled in by the capture work).

/// Captures another thread of this process by sending it a real-time signal.
public final class SignalSampler: @unchecked Sendable {
    public static func shared() throws(StallWatchError) -> SignalSampler {
        throw StallWatchError(.unsupported, "signal sampler not built yet")
    }

    /// Copies the registers and stack of thread `threadID`; waits at most `timeout` for the handler to run.
    public func capture(threadID: Int32, timeout: Duration) -> Result<StackCapture, StallWatchError> {
        .failure(StallWatchError(.unsupported, "signal sampler not built yet"))
    }
}
