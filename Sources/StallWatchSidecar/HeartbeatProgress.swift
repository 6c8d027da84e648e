// HeartbeatProgress: a watched process's own loop words, read from its heartbeat segment by polling.
import StallWatch

/// Progress of another process's loop from the heartbeat segment it publishes (``HeartbeatReader``): the same
/// sequence, phase and phase start the embedded watchdog reads, so phases are known in reports.
///
/// A thread stopped by a signal or a debugger (state T/t) reads as not running: not the loop's fault.
struct HeartbeatProgress: ProgressSource {
    let reader: HeartbeatReader
    let processID: Int32
    let threadID: Int32
    let polling: PollingWait

    init(reader: HeartbeatReader, processID: Int32, threadID: Int32, polling: PollingWait) {
        self.reader = reader
        self.processID = processID
        self.threadID = threadID
        self.polling = polling
    }

    var sampledThread: SampledThread? { SampledThread(threadID: threadID, stackLow: 0, stackHigh: 0) }

    /// The segment's state now.
    ///
    /// - Throws: What ``HeartbeatReader/read()`` throws when the segment was lost or rewritten.
    func readSegment() throws(SidecarError) -> ProgressReading {
        let state = try reader.read()
        var snapshot = state.snapshot
        if snapshot.isBusy, threadStopped() { snapshot.activity = [] }
        return .progress(snapshot, stallEndNanos: state.stallEndNanos)
    }

    func read(now: UInt64) -> ProgressReading {
        do {
            return try readSegment()
        } catch {
            return .ended(reason: "the heartbeat became invalid during the stall: \(error.message)")
        }
    }

    func wait(for wait: StallDetector.Wait, nextSampleAt: UInt64?) -> Bool {
        polling.wait(for: wait, nextSampleAt: nextSampleAt)
    }

    /// Stopped by a signal or a debugger.
    private func threadStopped() -> Bool {
        let state = ProcDirectory(processID: processID, threadID: threadID).status()?.state
        return state == "T" || state == "t"
    }
}
