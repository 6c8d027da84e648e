// Watches the Dispatch main queue of a process that runs dispatchMain() (or @MainActor work) with pings.
import CStallWatchCore
import Dispatch
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Makes the Dispatch main queue watchable by a ``Watchdog`` in a process that has no run loop of its own:
/// it only calls `dispatchMain()`, or runs `@MainActor` work.
///
/// Every ``interval`` the probe submits a tiny block to `DispatchQueue.main` and publishes a busy phase
/// (`beforeSources`) into ``state`` until the block runs, when it publishes `beforeWaiting` (idle). A main queue
/// stuck in some block leaves the ping unanswered, so the watchdog sees one busy phase outlast its threshold —
/// the same detector, sampling (of the process's main thread) and reports as for an ``EventLoop``. At most one
/// ping is outstanding.
///
/// Detection comes within `thresholdMs + interval` of the moment the queue got stuck (the next ping goes out
/// at most one interval after the last one was answered). The stall's duration is measured from the
/// unanswered ping, so it may be short by up to one interval.
///
/// ```swift
/// let probe = MainQueueProbe(interval: .milliseconds(100))
/// let watchdog = Watchdog(loop: probe, configuration: try .load())
/// try watchdog.start()
/// probe.start()          // on the main thread (it then knows its stack at once), right before the loop runs
/// dispatchMain()
/// ```
///
/// Cost: one block on the main queue per interval (the idle main thread wakes for it), and one thread
/// (`stallwatch-ping`) that sends the pings, parked or in a timed wait.
public final class MainQueueProbe: WatchedLoop, SampledLoop, @unchecked Sendable {
    // @unchecked Sendable: all lets, of thread-safe types.
    public let name: String
    public let state = LoopState()
    /// Time between a ping's answer and the next ping.
    package let interval: Duration
    private let target: DispatchQueue
    /// True when the pinged queue is the main queue, whose thread never changes.
    private let targetIsMain: Bool
    /// Sends the next ping from a thread of its own, armed when a ping is answered. A Dispatch timer would
    /// take two wake-ups to fire (the event thread, then a pool thread for the handler), and on a loaded
    /// machine each can be late by tens of milliseconds: a late ping starts the busy phase late, and a stall
    /// shorter than threshold + lateness goes unseen.
    private let clock: PingClock
    private let annotationStore = LoopAnnotations()
    /// The threads that answered pings, the last one, and whether a thread other than the main thread ever answered
    /// a main-queue ping: only `dispatchMain()` hands the main queue to pool threads, and for good — the main thread
    /// then sits parked in `sigsuspend` (Linux libdispatch keeps it alive that way), no longer the queue's drainer.
    private let threads = Mutex<(known: [Int32: SampledThread], last: Int32?, poolDrained: Bool)>(([:], nil, false))
    /// Finds the thread draining the pinged queue now (after `dispatchMain()`, a pool thread).
    private let owner: QueueDrainOwner
    /// For a queue pool threads drain: the thread that answered the last ping and its schedule, read as the next
    /// ping was sent (the start of that ping's busy phase). Pool threads are reused, so the thread that takes the
    /// next ping up is most often that one: its run-queue wait over a stall with nobody draining the queue says
    /// whether the machine held the queue up. One `schedstat` read per ping, on the probe's own thread.
    private let lastDrainerAtPing = Mutex<(sequence: UInt64, threadID: Int32, schedule: ThreadSchedule)?>(nil)
    /// The threads that answered the last 64 pings, by the sequence of the busy phase each answer ended (a watcher
    /// held up by a loaded machine may look at a stall's end after many more pings were answered).
    private let answeredBy = Mutex<[(sequence: UInt64, threadID: Int32)]>([])
    private let answered = Atomic<UInt64>(0)
    /// Bumped by start and stop: a ping or timer of an older generation does nothing.
    private let generation = Atomic<UInt64>(0)
    private let running = Atomic<Bool>(false)
    /// The loop-state sequence; records come from the probe's thread (ping sent) and the main thread (ping
    /// answered), strictly alternating, and from stop().
    private let sequence = Mutex<UInt64>(0)

    /// - Parameters:
    ///   - name: Appears in reports (`loop.name`).
    ///   - interval: Time between a ping's answer and the next ping (1 ms or more).
    public convenience init(
        name: String = StallWatchConfiguration.defaultLoopName, interval: Duration = .milliseconds(100)
    ) {
        self.init(name: name, interval: interval, queue: .main, isMain: true)
    }

    /// Pings `queue` (a serial queue) instead of the main queue; the sampled thread is the one holding its drain
    /// lock (used by tests).
    init(name: String, interval: Duration, queue: DispatchQueue, isMain: Bool = false) {
        self.name = name
        self.interval = max(interval, .milliseconds(1))
        self.target = queue
        // Not `queue === .main`: each access to DispatchQueue.main may return a new wrapper object.
        self.targetIsMain = isMain
        self.owner = QueueDrainOwner(mainQueue: isMain)
        let clock = PingClock()
        self.clock = clock
        let body: @Sendable () -> Void = { [weak self] in
            clock.run { [weak self] generation in self?.sendPing(generation: generation) }
        }
        // Detached: it ends when the probe goes (deinit closes the clock). Without a thread, a pool thread.
        if (try? NamedThread(name: "stallwatch-ping", body)) == nil { DispatchQueue.global().async(execute: body) }
    }

    deinit {
        stop()
        clock.close()
    }

    var isRunning: Bool { running.load(ordering: .acquiring) }

    /// Starts pinging at once. Call it on the main thread where possible: the probe then knows the thread to
    /// sample even if the queue is stuck before the first ping is answered. Does nothing when running.
    public func start() {
        guard running.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
        else { return }
        let current = generation.add(1, ordering: .acquiringAndReleasing).newValue
        if targetIsMain, sw_gettid() == getpid() { learnCurrentThread() }
        clock.arm(at: DispatchTime.now().uptimeNanoseconds, generation: current)
    }

    /// Stops pinging and publishes `exit` (not running). Stop the watchdog first, or an outstanding ping's
    /// stall reads as ended here.
    public func stop() {
        guard running.compareExchange(expected: true, desired: false, ordering: .acquiringAndReleasing).exchanged
        else { return }
        sequence.withLock { _ in _ = generation.add(1, ordering: .acquiringAndReleasing) }
        record(.exit, busyEdge: false, generation: nil)
    }

    /// The thread draining the pinged queue now, read from libdispatch's drain lock (see `QueueDrainOwner`): under
    /// `dispatchMain()` the main queue runs on pool threads, and a serial queue's blocks on whichever pool thread
    /// drains it, so the thread that answered the last ping says nothing about the one stuck now. A thread that
    /// never answered a ping is returned without stack bounds (the capture then reads from its SP up). When nobody
    /// drains the main queue, its own thread while it lives (it is what holds the queue up); nil for another queue,
    /// or once `dispatchMain()` has ended the main thread. Only if the drain lock cannot be read (its private layout did not check out) is
    /// the last thread that answered used, and then only if a single thread ever did (a queue drained by the
    /// main thread); with several candidates, nil (no sample beats a wrong one).
    package var sampledThread: SampledThread? {
        let reading = owner.reading
        return threads.withLock { threads in
            switch reading {
            case .thread(let draining):
                return threads.known[draining] ?? SampledThread(threadID: draining, stackLow: 0, stackHigh: 0)
            case .idle:
                return threads.poolDrained ? nil : livingMainThread(known: threads.known)
            case .unavailable:
                if threads.known.isEmpty { return livingMainThread(known: threads.known) }
                guard threads.known.count == 1 else { return nil }
                return threads.last.flatMap { threads.known[$0] }
            }
        }
    }

    /// Nobody drains the queue (or nobody has yet). The main queue is then the main thread's to drain (before
    /// `dispatchMain()`, or under a loop of the main thread's own): while that thread lives, it is what holds the
    /// queue up. After `dispatchMain()` the main thread no longer drains it (it exited, or sits parked), and the
    /// queue waits for a pool thread: nil.
    private func livingMainThread(known: [Int32: SampledThread]) -> SampledThread? {
        let main = getpid()
        guard targetIsMain, let state = ProcDirectory(processID: main, threadID: main).stat()?.state, state != "Z",
            state != "X"
        else { return nil }
        return known[main] ?? SampledThread(threadID: main, stackLow: 0, stackHigh: 0)
    }

    /// Pings answered since the probe was created.
    package var iterations: UInt64? { answered.load(ordering: .relaxed) }

    /// Attaches key/values to the work the main queue is doing now; they appear in the report of a stall that
    /// happens before ``clearAnnotations()``. Safe from any thread.
    public func annotate(_ key: String, _ value: String) { annotationStore.set(key, value) }

    /// Removes the annotations set with ``annotate(_:_:)``.
    public func clearAnnotations() { annotationStore.removeAll() }

    package var annotations: [String: String] { annotationStore.values }

    // MARK: Pings

    /// On the probe's thread.
    private func sendPing(generation sent: UInt64) {
        guard let busy = record(.beforeSources, busyEdge: true, generation: sent) else { return }
        let drainer = threads.withLock { threads in
            !targetIsMain || threads.poolDrained ? threads.last : nil
        }
        if let drainer {
            let schedule = ProcDirectory(processID: getpid(), threadID: drainer).schedstat(now: sw_monotonic_ns())
            lastDrainerAtPing.withLock { $0 = schedule.map { (busy, drainer, $0) } }
        }
        target.async { [weak self] in self?.answer(generation: sent) }
    }

    /// Nobody drains the pinged queue (see ``sampledThread``): a queue pool threads drain waits for one to take it.
    package var unsampledReason: String? {
        let poolDrained = threads.withLock { !targetIsMain || $0.poolDrained }
        guard poolDrained else { return nil }
        return targetIsMain
            ? "no thread was draining the main queue (after dispatchMain(), pool threads drain it): it was waiting "
                + "for a pool thread to take it up, so there was no thread to sample"
            : "no thread was draining the queue: it was waiting to be taken up (by a pool thread, or behind the work "
                + "of the queue it targets), so there was no thread to sample"
    }

    /// The thread whose answer ended the ping's busy phase `sequence` (a stall with nobody draining the queue), with
    /// its schedule at the phase's start when it was the thread read as that ping was sent.
    package func threadThatTookUp(busyPhase sequence: UInt64) -> (threadID: Int32, scheduleAtStart: ThreadSchedule?)? {
        guard let taker = answeredBy.withLock({ $0.last { $0.sequence == sequence } })?.threadID else { return nil }
        guard let baseline = lastDrainerAtPing.withLock({ $0 }), baseline.sequence == sequence,
            baseline.threadID == taker
        else { return (taker, nil) }
        return (taker, baseline.schedule)
    }

    /// On the pinged queue (the main thread).
    private func answer(generation sent: UInt64) {
        let tid = sw_gettid()
        owner.confirm(drainingThread: tid)
        learnCurrentThread()
        guard record(.beforeWaiting, busyEdge: false, generation: sent, answeredBy: tid) != nil else { return }
        answered.add(1, ordering: .relaxed)
        clock.arm(at: DispatchTime.now().uptimeNanoseconds + interval.nanoseconds, generation: sent)
    }

    /// Remembers the calling thread (reading stack bounds once per thread: for the main thread glibc parses
    /// /proc/self/maps).
    private func learnCurrentThread() {
        let tid = sw_gettid()
        let main = getpid()
        let known = threads.withLock { threads in
            threads.last = tid
            if targetIsMain, tid != main { threads.poolDrained = true }
            return threads.known[tid] != nil
        }
        guard !known else { return }
        // libdispatch's pool threads block nearly every signal: unblock the sampler's on this one.
        let me = (try? SignalSampler.shared())?.registerCurrentThread() ?? SampledThread.current()
        threads.withLock { threads in
            if threads.known.count >= 256 { threads.known.removeAll() }  // a pool that churns threads
            threads.known[tid] = me
        }
    }

    /// Publishes a transition unless the probe was stopped or restarted since `generation` (checked under the
    /// same lock stop() bumps it with, so a late ping never republishes a busy phase after `exit`). Returns the
    /// sequence recorded; nil when it did not publish.
    @discardableResult
    /// `answeredBy`: the thread whose answer ends the busy phase, noted before the end is published (a watchdog
    /// that sees the end at once asks who took the queue up).
    private func record(
        _ activity: LoopActivity, busyEdge: Bool, generation expected: UInt64?, answeredBy taker: Int32? = nil
    ) -> UInt64? {
        sequence.withLock { value in
            if let expected, generation.load(ordering: .acquiring) != expected { return nil }
            value &+= 1
            if let taker {
                let busy = value &- 1
                answeredBy.withLock { answers in
                    if answers.count >= 64 { answers.removeFirst() }
                    answers.append((busy, taker))
                }
            }
            state.record(activity, sequence: value, busyEdge: busyEdge, timeMoved: true)
            return value
        }
    }
}

/// When the probe's next ping goes out, and the thread that sends it: parked while no ping is armed, otherwise
/// in one timed semaphore wait until the ping is due (one wake-up, straight from the kernel's timer).
private final class PingClock: Sendable {
    /// When the armed ping is due (DispatchTime uptime nanoseconds); 0 when none is.
    private let due = Atomic<UInt64>(0)
    private let generation = Atomic<UInt64>(0)
    private let closed = Atomic<Bool>(false)
    private let wake = DispatchSemaphore(value: 0)

    /// Arms the next ping for `generation` at `at`, replacing an armed one.
    func arm(at: UInt64, generation armed: UInt64) {
        generation.store(armed, ordering: .releasing)
        due.store(max(at, 1), ordering: .releasing)
        wake.signal()
    }

    /// Ends ``run(_:)``.
    func close() {
        closed.store(true, ordering: .releasing)
        wake.signal()
    }

    /// The sending thread: calls `send` with the armed generation when each armed ping is due, until closed.
    func run(_ send: (UInt64) -> Void) {
        while !closed.load(ordering: .acquiring) {
            let at = due.load(ordering: .acquiring)
            guard at != 0 else {
                wake.wait()
                continue
            }
            let now = DispatchTime.now().uptimeNanoseconds
            if now < at {
                _ = wake.wait(timeout: DispatchTime(uptimeNanoseconds: at))
                continue
            }
            let armed = generation.load(ordering: .acquiring)
            if due.compareExchange(expected: at, desired: 0, ordering: .acquiringAndReleasing).exchanged {
                send(armed)
            }
        }
    }
}
