// TargetWatcher: watches one loop of another process (heartbeat or /proc evidence) and records its stalls.
import CStallWatchCore
import Dispatch
import StallWatch
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// What a sidecar tells its caller, on the watching thread.
public enum SidecarEvent: Sendable {
    /// Watching began: the target, the thread, `heartbeat` or `proc`, and the threshold in use.
    case watching(pid: Int32, threadID: Int32, source: DetectionSource, thresholdMs: Int)
    /// A heartbeat was found but rejected (or lost); watching goes on from /proc.
    case heartbeatRejected(SidecarError)
    /// A stall event, as an embedded watchdog would deliver it.
    case stall(StallEvent)
    /// The target exited; watching ended.
    case targetExited(pid: Int32)
    /// One watched thread is no longer watched while its process lives on: it exited, or it was renamed and no
    /// longer matches the thread rule it was picked by (`reason` says which).
    case threadDropped(pid: Int32, threadID: Int32, reason: String)
    /// Watching from /proc began with the thread asleep in a lock wait that records no owner, which was taken as its
    /// idle wait (a loop's queue or condition wait looks the same): the call, and how long the thread had not run
    /// then, at least (nil: unreadable). Told once, when that is at least the threshold, so that a watch started
    /// mid-incident says what it did not judge stuck.
    case lockWaitTakenAsIdle(pid: Int32, threadID: Int32, call: String, blockedForAtLeastMs: Double?)
}

/// Watches one loop thread of another process from a sidecar with the embedded watchdog's driver
/// (``StallFollower``: the same ``StallDetector`` and report code), polling at a modest interval.
///
/// - With a valid heartbeat segment the detector reads the loop's own published words (`detection.source`
///   `heartbeat`, phases known).
/// - Without one it reads progress evidence from /proc (``ProcProgressProbe``; `detection.source` `proc`).
///
/// Samples come from ``PtraceStackSampling`` (`capture.method` `ptrace`).
public final class TargetWatcher: @unchecked Sendable {  // run() on one thread; stop() from any.
    /// How the sidecar learns about the loop's progress.
    public enum Mode: Sendable, Equatable {
        /// Use `stallwatch.<pid>` in the heartbeat directory when it validates, else /proc.
        case automatic
        /// Only this heartbeat segment (the daemon).
        case heartbeat(path: String)
        /// Only /proc evidence.
        case proc
    }

    /// Why ``run()`` returned.
    public enum Outcome: Sendable, Equatable {
        case stopped
        case targetExited
        /// The watched thread exited; its process lives on.
        case threadExited
    }

    public struct Options: Sendable {
        public var pid: Int32
        /// The thread to watch; nil: the heartbeat's loop thread, else the main thread (tid = pid).
        public var threadID: Int32?
        public var mode: Mode = .automatic
        /// Threshold, sampling, reports; `thresholdMs` is replaced by the heartbeat's unless `thresholdFixed`.
        public var configuration: StallWatchConfiguration
        package var thresholdFixed = false
        /// Where heartbeat segments are looked for.
        public var heartbeatDirectory = HeartbeatPublisher.defaultDirectory
        /// Time between looks; nil: threshold / 5, at least 10 ms.
        package var pollIntervalMs: Int?
        /// From /proc, judge the thread only once it has been seen in an idle wait of its own: a thread whose name
        /// an older thread of the process has, which may have its creator's name and be no loop at all.
        package var judgedOnceSeenIdle = false

        public init(pid: Int32, configuration: StallWatchConfiguration) {
            self.pid = pid
            self.configuration = configuration
        }
    }

    package let options: Options
    package let threadID: Int32
    /// `heartbeat` or `proc`.
    package let source: DetectionSource
    /// The thresholds stalls are judged by: the configuration's, or the heartbeat's own.
    package let detector: StallDetector.Configuration
    /// The stall threshold in whole milliseconds, for event lines.
    package var thresholdMs: Int { Int(detector.thresholdNanos / 1_000_000) }
    /// The loop's name in reports and metrics: the heartbeat's, else the thread's name, else `main`.
    package let loopName: String
    private let heartbeat: HeartbeatReader?
    private let sampling: PtraceStackSampling
    private let recorder: StallRecorder
    private let onEvent: @Sendable (SidecarEvent) -> Void
    private let startTimeTicks: UInt64?
    private let stopRequested = Atomic<Bool>(false)
    private let stopReason = Mutex<String?>(nil)
    private let wakeup = DispatchSemaphore(value: 0)
    /// When the watching loop last turned (CLOCK_MONOTONIC): creation, then before every look at the target.
    private let lastTurn = Atomic<UInt64>(sw_monotonic_ns())

    /// Checks the target and chooses the source.
    ///
    /// - Throws: `.noSuchProcess` when the pid (or thread) does not exist; `.permissionDenied` when its /proc
    ///   files cannot be read with ptrace rights (with what to check); `.invalidHeartbeat` in `.heartbeat` mode.
    public init(options: Options, onEvent: @escaping @Sendable (SidecarEvent) -> Void) throws(SidecarError) {
        self.onEvent = onEvent
        let pid = options.pid
        guard pid > 0, kill(pid, 0) == 0 || errno == EPERM, let started = HeartbeatPublisher.startTimeTicks(pid: pid)
        else { throw SidecarError.noSuchProcess(pid: pid) }
        startTimeTicks = started
        if pid == getpid() {
            throw SidecarError(
                .permissionDenied, "a process cannot watch itself with ptrace: embed the Watchdog instead")
        }

        var reader: HeartbeatReader?
        switch options.mode {
        case .proc: break
        case .heartbeat(let path): reader = try HeartbeatReader(path: path)
        case .automatic:
            for file in HeartbeatReader.segmentFiles(in: options.heartbeatDirectory) where file.pid == pid {
                do {
                    let candidate = try HeartbeatReader(path: file.path, expectedPID: pid)
                    let tid = candidate.segment.loopThreadID
                    if options.threadID == nil || options.threadID == tid || tid == 0 {
                        reader = candidate
                        break
                    }
                } catch {
                    onEvent(.heartbeatRejected(error))
                }
            }
        }
        var configuration = options.configuration
        configuration.strategy = .deadline  // a sidecar cannot ask for a signal per transition
        var detector = configuration.detectorConfiguration
        if let reader, !options.thresholdFixed {
            // The loop's own thresholds, as its segment holds them (nanoseconds).
            detector = StallDetector.Configuration(
                thresholdNanos: reader.segment.thresholdNanos, hangThresholdNanos: reader.segment.hangThresholdNanos,
                lateWakeupToleranceNanos: detector.lateWakeupToleranceNanos, strategy: .deadline)
        }
        // The sidecar's own lateness says nothing of its target: judge at once (see `lateWakeupDefers`).
        detector.lateWakeupDefers = false
        self.detector = detector
        let tid = options.threadID ?? reader.map { $0.segment.loopThreadID == 0 ? pid : $0.segment.loopThreadID } ?? pid
        let thread = ProcDirectory(processID: pid, threadID: tid)
        guard thread.exists else { throw SidecarError.noSuchProcess(pid: pid, tid: tid) }
        if thread.refusesPtraceReads {
            throw SidecarError.permissionDenied(pid: pid, doing: "reading /proc/\(pid)/task/\(tid)/syscall")
        }
        heartbeat = reader
        threadID = tid
        source = reader == nil ? .proc : .heartbeat
        sampling = PtraceStackSampling(processID: pid, captureTimeoutNanos: configuration.intervals.captureTimeout)
        var finalOptions = options
        finalOptions.configuration = configuration
        self.options = finalOptions
        let named = reader?.segment.loopName ?? (thread.comm() ?? "main")
        loopName = named.isEmpty ? "main" : named
        recorder = StallRecorder(
            configuration: configuration, detector: detector, loopName: loopName,
            target: StallRecorder.Target(
                processID: pid, detectionSource: source, sampler: sampling,
                process: ProcessIdentity.of(pid: pid), phaseKnown: reader != nil,
                setupErrors: sampling.setupError.map { [$0] } ?? [],
                peerSampler: { [timeout = configuration.intervals.captureTimeout] in
                    PtraceStackSampling(processID: $0, captureTimeoutNanos: timeout)
                }),
            emit: { onEvent(.stall($0)) })
    }

    /// When the watching loop last turned (CLOCK_MONOTONIC nanoseconds): it turns at least every poll interval,
    /// and between the samples of a stall. A watcher that does not turn is itself stuck (a capture, a report write
    /// or the recorder blocked), and nobody is watching its target.
    var lastTurnNanos: UInt64 { lastTurn.load(ordering: .relaxed) }

    /// The longest a healthy watcher goes between turns, give or take one capture: its poll interval.
    var pollIntervalNanos: UInt64 {
        max(10_000_000, options.pollIntervalMs.map { UInt64(max(0, $0)) * 1_000_000 } ?? detector.thresholdNanos / 5)
    }

    /// Where reports go.
    package var reportDirectory: String {
        options.configuration.reportDirectoryPath
    }

    /// For tests: called with the thread id after every ptrace capture.
    func onCapture(_ body: @escaping @Sendable (Int32) -> Void) { sampling.afterCapture = body }

    /// Asks ``run()`` to return; a stall being followed is written `unrecovered` with `reason`. Any thread.
    public func stop(reason: String? = nil) {
        stopReason.withLock { $0 = $0 ?? reason }
        stopRequested.store(true, ordering: .releasing)
        wakeup.signal()
    }

    /// Watches until ``stop(reason:)`` or until the target exits. Blocks the calling thread.
    public func run() -> Outcome {
        onEvent(.watching(pid: options.pid, threadID: threadID, source: source, thresholdMs: thresholdMs))
        let poll = pollIntervalNanos
        var progress = TargetProgress(
            processID: options.pid, threadID: threadID, startTimeTicks: startTimeTicks, heartbeat: heartbeat,
            polling: PollingWait(intervalNanos: poll, wakeup: wakeup), now: sw_monotonic_ns(),
            judgedOnceSeenIdle: options.judgedOnceSeenIdle
        ) { [onEvent] in onEvent(.heartbeatRejected($0)) }
        // Told when the thread had been in the wait for at least the threshold: what could be a stall not judged one.
        progress.onLockWaitTakenAsIdle = { [onEvent, pid = options.pid, tid = threadID, detector] call, blocked in
            guard blocked.map({ $0 >= detector.thresholdNanos }) ?? true else { return }
            onEvent(
                .lockWaitTakenAsIdle(
                    pid: pid, threadID: tid, call: call, blockedForAtLeastMs: blocked.map(StallReport.milliseconds)))
        }
        var follower = StallFollower(
            source: progress, recorder: recorder, configuration: detector,
            watcher: .sidecar)
        let turning = {
            self.lastTurn.store(sw_monotonic_ns(), ordering: .relaxed)
            return !self.stopRequested.load(ordering: .acquiring)
        }
        switch follower.run(while: turning) {
        case .sourceEnded:
            if TargetProgress.alive(processID: options.pid, startTimeTicks: startTimeTicks) {
                onEvent(.threadDropped(pid: options.pid, threadID: threadID, reason: "the thread exited"))
                return .threadExited
            }
            onEvent(.targetExited(pid: options.pid))
            return .targetExited
        case .stopped:
            let reason = stopReason.withLock { $0 }
            recorder.abandon(
                now: sw_monotonic_ns(), reason: reason ?? "the sidecar stopped while the loop was still stuck")
            recorder.waitForLineFills()
            return .stopped
        }
    }
}
