// Stand-ins until the capture and report-writer work merges (deleted then).
import CStallWatch
public struct SampledThread: Sendable {
    public var threadID: Int32
    public static func current() -> SampledThread { SampledThread(threadID: sw_gettid()) }
}
extension SignalSampler {
    public func capture(_ thread: SampledThread, timeout: Duration) -> Result<StackCapture, StallWatchError> {
        capture(threadID: thread.threadID, timeout: timeout)
    }
}
