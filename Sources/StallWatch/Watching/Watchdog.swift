// The watchdog: a named thread that waits on a semaphore with a deadline and follows each stall to its end.
import CStallWatchCore
import Dispatch
import Synchronization

/// Watches one loop (an ``EventLoop`` or any ``WatchedLoop``) from its own thread (`stallwatch-watchdog`) and writes a report for every stall.
///
/// The thread sleeps on a `DispatchSemaphore`: parked with no timeout while the loop is idle (the loop signals
/// it once when it becomes busy again), or with a timeout equal to the time left before the current busy phase
/// would cross the threshold. When it wakes and the loop is still in the same busy phase, the stall has begun:
/// it samples the loop thread every `sampleIntervalMs`, and the loop itself records the moment it moves on.
///
/// ```swift
/// let loop = try EventLoop()
/// let watchdog = try Watchdog(loop: loop, configuration: .load())
/// try watchdog.start()
/// loop.run()
/// ```
public final class Watchdog: @unchecked Sendable {
    // @unchecked Sendable: `recorder`/`heartbeat` change only in `lock`, before the thread using them starts.
    /// The watched loop: an ``EventLoop``, ``FoundationRunLoopMonitor`` or ``MainQueueProbe``.
    package let loop: any WatchedLoop
    package let configuration: StallWatchConfiguration
    private let onEvent: @Sendable (StallEvent) -> Void
    private let stopRequested = Atomic<Bool>(false)
    private let lock = Mutex<NamedThread?>(nil)
    /// Set from a stall's `began` to its `ended` (or the watchdog's stop), for ``isHealthy``.
    let stallInProgress = Atomic<Bool>(false)
    private var recorder: StallRecorder?
    private var heartbeat: HeartbeatPublisher?
    /// The loop's lead-up (`configuration.leadUp`, for a loop that times its items).
    private var leadUp: LeadUpRecorder?
    private let heartbeatProblem = Mutex<StallWatchError?>(nil)

    /// - Parameters:
    ///   - loop: The loop to watch.
    ///   - configuration: Thresholds, sampling and report settings.
    ///   - onEvent: Called for every stall event (logging, metrics), one at a time: on the watchdog thread, except
    ///     `ended`, which comes from the watchdog's report queue once the final report is written. Keep it short.
    public init(
        loop: any WatchedLoop, configuration: StallWatchConfiguration = StallWatchConfiguration(),
        onEvent: @escaping @Sendable (StallEvent) -> Void = { _ in }
    ) {
        self.loop = loop
        self.configuration = configuration
        self.onEvent = onEvent
    }

    /// The recorder and lead-up of the running watchdog, for a snapshot; nil when it is not running.
    var snapshotParts: (recorder: StallRecorder, leadUp: LeadUpRecorder?)? {
        lock.withLock { thread in thread == nil ? nil : recorder.map { ($0, leadUp) } }
    }

    /// Where this watchdog writes its reports.
    public var reportDirectory: String {
        configuration.reportDirectoryPath
    }

    package var isRunning: Bool { lock.withLock { $0 != nil } }

    /// The heartbeat segment this watchdog published (`configuration.heartbeat`), if any.
    var heartbeatPath: String? { lock.withLock { _ in heartbeat?.path } }

    /// Why the heartbeat was not published (the loop was already running, the directory is missing …).
    /// Detection in-process is not affected.
    var heartbeatError: StallWatchError? { heartbeatProblem.withLock { $0 } }

    /// Starts the watchdog thread. Does nothing when `configuration.enabled` is false.
    ///
    /// - Throws: `.invalidState` if the loop already has a watchdog; `.systemCall` if the thread cannot start.
    public func start() throws(StallWatchError) {
        guard configuration.enabled else { return }
        try lock.withLock { (thread: inout NamedThread?) throws(StallWatchError) in
            guard thread == nil else { return }
            guard
                loop.state.watchdogAttached.compareExchange(
                    expected: false, desired: true, ordering: .acquiringAndReleasing
                ).exchanged
            else {
                throw StallWatchError(.invalidState, "loop '\(loop.name)' already has a watchdog")
            }
            stopRequested.store(false, ordering: .relaxed)
            publishHeartbeat()
            let recorder = StallRecorder(
                configuration: configuration, loopName: configuration.name(of: loop), emit: onEvent)
            self.recorder = recorder
            // Only a loop that times its items gets a lead-up: another's rings would stay empty and read as an idle
            // loop (the main-queue probe sees its pings, not the queue's items), so it gets none rather than a wrong one.
            if configuration.leadUp, loop.sampled?.timesItems == true,
                let ring = loop.state.startLeadUp(configuration.leadUpSettings)
            {
                let leadUp = LeadUpRecorder(ring: ring, stacks: configuration.leadUpStacks) {
                    [loop, weak recorder, configuration] in
                    // The stacks' sampler mode: the stall sampler, not while it follows a stall (its samples do).
                    // Weak: the recorder holds the lead-up.
                    guard let recorder, !recorder.isFollowing, let thread = loop.sampled?.sampledThread,
                        let sampler = recorder.target.sampler
                    else { return nil }
                    return sampler.sample(thread, configuration: configuration).frames
                }
                recorder.leadUp = leadUp
                self.leadUp = leadUp
            }
            if case .classic = configuration.detectorConfiguration.strategy {
                loop.state.signalEveryTransition(true)
            }
            do throws(StallWatchError) {
                let leadUp = self.leadUp, heartbeat = self.heartbeat
                thread = try NamedThread(name: "stallwatch-watchdog") { [self] in
                    watch(recorder, leadUp: leadUp, heartbeat: heartbeat)
                }
            } catch {
                heartbeat?.withdraw()
                heartbeat = nil
                leadUp?.stacks?.close()
                leadUp = nil
                loop.state.stopLeadUp()
                loop.state.watchdogAttached.store(false, ordering: .releasing)
                loop.state.signalEveryTransition(false)
                throw error
            }
        }
    }

    /// Stops and joins the watchdog thread. A stall in progress is written as `unrecovered`.
    public func stop() {
        lock.withLock { thread in
            guard let running = thread else { return }
            stopRequested.store(true, ordering: .releasing)
            loop.state.wakeup.signal()
            running.join()
            thread = nil
            recorder = nil
            leadUp?.stacks?.close()
            leadUp = nil
            loop.state.stopLeadUp()
            heartbeat?.withdraw()
            heartbeat = nil
            loop.state.signalEveryTransition(false)
            sw_loop_state_follow(loop.state.storage, 0)
            // Swallow a wake-up the loop may have posted meanwhile, so the next watchdog starts clean.
            while loop.state.wakeup.wait(timeout: .now()) == .success {}
            loop.state.watchdogAttached.store(false, ordering: .releasing)
        }
    }

    deinit { stop() }

    /// Publishes the heartbeat segment before the watchdog thread starts (the loop's words move into it), unless
    /// it is off or the loop already publishes one. A failure is kept in ``heartbeatError`` and reported as
    /// ``StallEvent/heartbeatFailed(_:)`` when the thread starts, never thrown.
    private func publishHeartbeat() {
        guard configuration.heartbeat, loop.state.heartbeat == nil else {
            heartbeatProblem.withLock { $0 = nil }
            return
        }
        do {
            heartbeat = try HeartbeatPublisher.publish(loop: loop, configuration: configuration, watchdogStarting: true)
            heartbeatProblem.withLock { $0 = nil }
        } catch {
            heartbeatProblem.withLock { $0 = error }
        }
    }

    // MARK: The watchdog thread

    /// The watchdog thread's body; what it uses is passed in (``stop()`` holds `lock` while it joins this thread).
    private func watch(_ recorder: StallRecorder, leadUp: LeadUpRecorder?, heartbeat: HeartbeatPublisher?) {
        if configuration.heartbeat, let problem = heartbeatProblem.withLock({ $0 }) {
            onEvent(.heartbeatFailed(problem))
        }
        recorder.warmUp()
        var source = LoopProgressSource(loop: loop, leadUp: leadUp) { [self] in
            stopRequested.load(ordering: .acquiring)
        }
        if let heartbeat {
            let server = SnapshotRequestServer(heartbeat: heartbeat, recorder: recorder, leadUp: leadUp) {
                [self] reason, leadUp in snapshotMoment(reason: reason, leadUp: leadUp)
            }
            source.onWake = { server.poll(now: sw_monotonic_ns()) }
        }
        var follower = StallFollower(
            source: source, recorder: recorder, configuration: configuration.detectorConfiguration,
            watcher: .watchdog
        ) { [self] in stallInProgress.store($0, ordering: .releasing) }
        _ = follower.run { !stopRequested.load(ordering: .acquiring) }
        recorder.abandon(now: sw_monotonic_ns())
        recorder.waitForLineFills()
        stallInProgress.store(false, ordering: .releasing)
    }
}
