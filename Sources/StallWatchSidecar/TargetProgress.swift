// TargetProgress: a sidecar's progress source for one thread of another process: heartbeat, else /proc.
import StallWatch

/// What a ``TargetWatcher`` follows: the thread's heartbeat segment while it validates, /proc evidence
/// otherwise — and from the moment a heartbeat is lost or rewritten, since it can no longer be trusted.
///
/// Every look first checks that the target is still the same live process (a reused pid is not): when it is
/// gone, a stall being followed is finished as `unrecovered`.
struct TargetProgress: ProgressSource {
    let processID: Int32
    let threadID: Int32
    private let startTimeTicks: UInt64?
    private let polling: PollingWait
    private var heartbeat: HeartbeatProgress?
    private var proc: ProcProgressProbe?
    /// Told when the heartbeat is lost and watching goes on from /proc.
    private let onHeartbeatLost: (SidecarError) -> Void
    /// Told once, after the first look from /proc, of a lock wait it took as the thread's idle wait
    /// (``ProcProgressProbe/lockWaitTakenAsIdle``).
    var onLockWaitTakenAsIdle: ((String, UInt64?) -> Void)?
    private var firstLookTold = false

    /// - Parameter judgedOnceSeenIdle: From /proc, the thread is judged only once seen in an idle wait of its own
    ///   (``ProcProgressProbe/judgedOnceSeenIdle``).
    init(
        processID: Int32, threadID: Int32, startTimeTicks: UInt64?, heartbeat: HeartbeatReader?, polling: PollingWait,
        now: UInt64, judgedOnceSeenIdle: Bool = false, onHeartbeatLost: @escaping (SidecarError) -> Void
    ) {
        self.processID = processID
        self.threadID = threadID
        self.startTimeTicks = startTimeTicks
        self.polling = polling
        self.onHeartbeatLost = onHeartbeatLost
        if let heartbeat {
            self.heartbeat = HeartbeatProgress(
                reader: heartbeat, processID: processID, threadID: threadID, polling: polling)
        } else {
            proc = ProcProgressProbe(processID: processID, threadID: threadID, now: now, polling: polling)
            proc?.judgedOnceSeenIdle = judgedOnceSeenIdle
        }
    }

    var sampledThread: SampledThread? { SampledThread(threadID: threadID, stackLow: 0, stackHigh: 0) }

    mutating func read(now: UInt64) -> ProgressReading {
        guard targetAlive() else { return .ended(reason: "the target exited while its loop was still stuck") }
        var notes: [String] = []
        if let heartbeat {
            do {
                return try heartbeat.readSegment()
            } catch {
                // Lost or rewritten: carry on from /proc rather than trust it.
                onHeartbeatLost(error)
                notes.append("the heartbeat became invalid during the stall: \(error.message)")
                self.heartbeat = nil
                proc = ProcProgressProbe(processID: processID, threadID: threadID, now: now, polling: polling)
                guard targetAlive() else {
                    return .ended(reason: "the target exited while its loop was still stuck", notes: notes)
                }
            }
        }
        let reading = proc?.read(now: now)
        if !firstLookTold, let proc {
            firstLookTold = true
            if let taken = proc.lockWaitTakenAsIdle { onLockWaitTakenAsIdle?(taken.call, taken.blockedNanos) }
        }
        switch reading {
        case .progress(let snapshot, let stallEnd, _)?:
            return .progress(snapshot, stallEndNanos: stallEnd, notes: notes)
        case .ended(let reason, _)?:
            // The thread is gone; when the whole process is, the stall is left as it is.
            return .ended(reason: targetAlive() ? reason : nil, notes: notes)
        case nil:
            return .ended(reason: nil, notes: notes)
        }
    }

    mutating func noteCapture() { proc?.noteCapture() }

    mutating func stallBegan() { proc?.stallBegan() }
    mutating func stallEnded() { proc?.stallEnded() }

    mutating func noteCapture(waitBefore: ThreadWait?, capturedAt: UInt64?) {
        proc?.noteCapture(waitBefore: waitBefore, capturedAt: capturedAt)
    }

    var phaseStartSchedule: ThreadSchedule? { heartbeat == nil ? proc?.phaseStartSchedule : nil }

    var withdrawal: String? { heartbeat == nil ? proc?.withdrawal : nil }
    var endedBy: String? { heartbeat == nil ? proc?.endedBy : nil }

    /// The heartbeat's sequence has not moved on, or the /proc probe does not see the thread back in its idle wait.
    func isStillStuck(after sequence: UInt64) -> Bool {
        if let heartbeat {
            guard let state = try? heartbeat.reader.read() else { return true }
            return state.snapshot.sequence == sequence
        }
        return proc?.isStillStuck(after: sequence) ?? true
    }

    func wait(for wait: StallDetector.Wait, nextSampleAt: UInt64?) -> Bool {
        polling.wait(for: wait, nextSampleAt: nextSampleAt)
    }

    private func targetAlive() -> Bool { Self.alive(processID: processID, startTimeTicks: startTimeTicks) }

    /// The same process (not a reused pid: its start time is `startTimeTicks`) exists and is not a zombie.
    static func alive(processID: Int32, startTimeTicks: UInt64?) -> Bool {
        guard let started = HeartbeatPublisher.startTimeTicks(pid: processID), started == startTimeTicks else {
            return false
        }
        guard let state = ProcDirectory(processID: processID).status()?.state else { return false }
        return !(state == "Z" || state == "X")
    }
}
