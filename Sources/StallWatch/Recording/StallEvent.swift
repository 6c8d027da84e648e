// What a watchdog tells its listeners (log sinks, metrics) about stalls as they happen.

/// A stall event, delivered on the watchdog thread.
public enum StallEvent: Sendable {
    /// The threshold was crossed; the provisional report (status `ongoing`) has been written.
    case began(StallReport)
    /// A stack sample was taken (index from 0) with this loop-thread pause.
    case sampled(reportID: String, index: Int, pauseMicros: Double?)
    /// The stall crossed the hang threshold.
    case escalated(StallReport)
    /// The loop moved on (status `ended`), or the watchdog stopped during the stall (status `unrecovered`);
    /// the final report has been written.
    case ended(StallReport)
    /// The watchdog woke late or the machine was suspended; the loop was not blamed.
    case lateWakeup(delayMs: Double)
    /// Writing a report failed; detection goes on.
    case reportFailed(StallWatchError)
    /// The heartbeat segment could not be published (``Watchdog/heartbeatError`` keeps it too); in-process
    /// detection goes on, but no sidecar can watch this loop. Delivered once, when the watchdog thread starts.
    case heartbeatFailed(StallWatchError)
}
