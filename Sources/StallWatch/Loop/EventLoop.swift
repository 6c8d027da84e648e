// A CFRunLoop-style run loop built on Dispatch that publishes every activity transition for a watchdog.
import CStallWatchCore
import Dispatch
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A run loop for a Linux service's main thread (or any thread), observable like CFRunLoop.
///
/// One iteration: `beforeTimers` → due timers fire → `beforeSources` → performed blocks and ready sources run
/// → `beforeWaiting` → ``idleWait(timeoutNanos:)`` until the next timer or a wake-up → `afterWaiting` → work that
/// woke the loop (the Dispatch main queue) runs → repeat. Each transition is published to ``state`` with atomic
/// stores only, so a ``Watchdog`` can tell a loop that is stuck in a busy phase from one that is idle.
///
/// Work submitted to `DispatchQueue.main` (and so `@MainActor` work) runs on this loop when it runs on the
/// process's main thread, through libdispatch's main-queue handle, as Foundation's RunLoop does on Linux.
public final class EventLoop: @unchecked Sendable {
    // @unchecked Sendable: the `var`s are the loop thread's (one run() at a time); the rest is Mutex/Atomic.
    /// How the loop treats the Dispatch main queue.
    public enum MainQueueIntegration: Sendable {
        /// Drain the main queue when `run()` is called on the process's main thread.
        case automatic
        /// Never drain it (another loop owns it).
        case disabled
    }

    /// Why `run(for:)` returned.
    public enum RunResult: Sendable, Equatable {
        case stopped
        case timedOut
    }

    public let name: String
    /// The published progress a watchdog reads.
    public let state = LoopState()
    private let mainQueueIntegration: MainQueueIntegration

    // Any thread.
    private let wakeFD: Int32
    private let pending = Mutex<[PendingWork]>([])
    private let stopRequested = Atomic<Bool>(false)
    private let running = Atomic<Bool>(false)
    private let loopThreadID = Atomic<Int32>(0)
    private let observerRegistry = Mutex<[LoopObserver]>([])
    private let observersVersion = Atomic<UInt64>(0)
    private let observerSerial = Atomic<UInt64>(0)
    private let annotationStore = LoopAnnotations()
    /// The lead-up label of work drained from the Dispatch main queue.
    private static let mainQueueLabel = LeadUpLabels.shared.id(for: "main queue")
    private let runningThread = Mutex<SampledThread?>(nil)
    /// Iterations started, stored (not incremented atomically) by the loop thread: a plain relaxed store.
    private let iterationsPublished = Atomic<UInt64>(0)

    // Loop thread only.
    private var sequence: UInt64 = 0
    private var iterationCount: UInt64 = 0
    /// Code ran on the loop since the last transition, so the next busy phase needs a fresh timestamp.
    private var calledOut = true
    private var timers = TimerQueue()
    private var observersSeen: UInt64 = 0
    private var activeObservers: [LoopObserver] = []
    private var observedMask: UInt32 = 0
    private var mainQueueFD: Int32 = -1

    /// Creates a loop and the one descriptor it owns (an eventfd that wakes its idle wait).
    ///
    /// - Parameters:
    ///   - name: Appears in reports (`loop.name`) and thread names.
    ///   - mainQueue: Whether to drain the Dispatch main queue when running on the main thread.
    /// - Throws: `.systemCall` naming `eventfd` when the wake-up descriptor cannot be created (the process or the
    ///   system is out of descriptors: `EMFILE`, `ENFILE`; or out of memory), with its `errno`. Nothing is left
    ///   open.
    public init(
        name: String = StallWatchConfiguration.defaultLoopName, mainQueue: MainQueueIntegration = .automatic
    ) throws(StallWatchError) {
        let fd = sw_eventfd_create()
        guard fd >= 0 else { throw Syscall.error("eventfd", errno: -fd) }
        self.name = name
        self.mainQueueIntegration = mainQueue
        wakeFD = fd
    }

    deinit { close(wakeFD) }

    /// The kernel thread id running the loop, or nil when it is not running.
    package var threadID: Int32? {
        let tid = loopThreadID.load(ordering: .acquiring)
        return tid == 0 ? nil : tid
    }

    var isRunning: Bool { running.load(ordering: .acquiring) }

    /// The thread running the loop, with its stack bounds, for samplers; nil when not running.
    package var sampledThread: SampledThread? { runningThread.withLock { $0 } }

    /// Loop iterations started since the loop was created, for metrics. Safe from any thread.
    package var iterations: UInt64? { iterationsPublished.load(ordering: .relaxed) }

    /// True when called on the thread currently running this loop.
    var inLoopThread: Bool { loopThreadID.load(ordering: .relaxed) == sw_gettid() }

    // MARK: Work

    /// Runs `block` on the loop thread in the next `beforeSources` phase. Safe from any thread.
    ///
    /// - Parameters:
    ///   - label: Names the work in the loop's lead-up (the items a report shows before a stall), unless
    ///     annotations set while it runs name it more precisely. Registered here, so the loop itself only stores
    ///     a number; keep labels to a bounded set of names (a route, a handler), not per-request values.
    ///   - block: The work.
    public func perform(label: String? = nil, _ block: @escaping @Sendable () -> Void) {
        perform(labelID: label.map(LeadUpLabels.shared.id(for:)) ?? 0, block)
    }

    /// `perform` with an interned label.
    func perform(labelID: UInt32, _ block: @escaping @Sendable () -> Void) {
        // The enqueue time is the start of the item's queue delay: read only while a lead-up is recorded.
        let work = PendingWork(
            block: block, label: labelID, enqueuedAt: state.leadUpRecorder == nil ? 0 : sw_monotonic_ns())
        let wasEmpty = pending.withLock { queue -> Bool in
            queue.append(work)
            return queue.count == 1
        }
        if wasEmpty { _ = sw_eventfd_signal(wakeFD) }
    }

    /// Schedules `block` to run on the loop after `delay`, then every `interval` if given.
    ///
    /// - Parameters:
    ///   - delay: Time until the first fire.
    ///   - interval: Time between later fires; nil for a one-shot timer.
    ///   - tolerance: How late a fire may be, letting the loop wake once for several timers.
    ///   - label: Names the timer's fires in the loop's lead-up; nil names them `timer`.
    /// - Returns: The timer, to cancel it.
    @discardableResult
    public func schedule(
        after delay: Duration, repeating interval: Duration? = nil, tolerance: Duration = .zero,
        label: String? = nil, _ block: @escaping @Sendable () -> Void
    ) -> LoopTimer {
        let timer = LoopTimer(
            intervalNanos: interval?.nanoseconds ?? 0, toleranceNanos: tolerance.nanoseconds,
            label: LeadUpLabels.shared.id(for: label ?? "timer"), block: block)
        let fireAt = sw_monotonic_ns() &+ delay.nanoseconds
        if inLoopThread {
            timers.insert(timer, fireAt: fireAt)
        } else {
            perform { [self] in timers.insert(timer, fireAt: fireAt) }
        }
        return timer
    }

    /// Runs `handler` on the loop whenever `fileDescriptor` is readable. Cancel the source to stop.
    ///
    /// - Parameter label: Names the handler's runs in the loop's lead-up; nil names them `read fd N`.
    public func addReadSource(
        fileDescriptor: Int32, label: String? = nil, _ handler: @escaping @Sendable () -> Void
    ) -> LoopSource {
        startSource(
            DispatchSource.makeReadSource(fileDescriptor: fileDescriptor, queue: sourceQueue),
            label: label ?? "read fd \(fileDescriptor)", handler)
    }

    /// Runs `handler` on the loop whenever `fileDescriptor` is writable. Cancel the source to stop.
    ///
    /// - Parameter label: Names the handler's runs in the loop's lead-up; nil names them `write fd N`.
    public func addWriteSource(
        fileDescriptor: Int32, label: String? = nil, _ handler: @escaping @Sendable () -> Void
    ) -> LoopSource {
        startSource(
            DispatchSource.makeWriteSource(fileDescriptor: fileDescriptor, queue: sourceQueue),
            label: label ?? "write fd \(fileDescriptor)", handler)
    }

    /// Runs `handler` on the loop when the process receives `signal`.
    ///
    /// Dispatch receives signals through signalfd on Linux, so the signal must be blocked in every thread: this
    /// blocks it in the calling thread; call it before starting other threads (they inherit the mask).
    public func addSignalSource(signal: Int32, _ handler: @escaping @Sendable () -> Void) -> LoopSource {
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, signal)
        pthread_sigmask(SIG_BLOCK, &set, nil)
        return startSource(
            DispatchSource.makeSignalSource(signal: signal, queue: sourceQueue), label: "signal \(signal)", handler)
    }

    private lazy var sourceQueue = DispatchQueue(label: "stallwatch.loop.\(name).sources")

    private func startSource(
        _ source: any DispatchSourceProtocol, label: String, _ handler: @escaping @Sendable () -> Void
    ) -> LoopSource {
        let loopSource = LoopSource(source: source)
        loopSource.start(on: self, label: LeadUpLabels.shared.id(for: label), handler: handler)
        return loopSource
    }

    // MARK: Observers

    /// Calls `callback` on the loop thread for each activity in `activities`.
    ///
    /// - Parameters:
    ///   - activities: The activities to observe.
    ///   - order: Observers with lower orders are called first.
    ///   - repeats: False for an observer that is removed after its first call.
    /// - Returns: The registration; pass it to ``removeObserver(_:)``.
    /// - Warning: The callback runs on the loop thread inside the transition: keep it short.
    @discardableResult
    public func addObserver(
        activities: LoopActivity, order: Int = 0, repeats: Bool = true,
        _ callback: @escaping @Sendable (LoopActivity) -> Void
    ) -> LoopObserver {
        let observer = LoopObserver(
            activities: activities, order: order, repeats: repeats,
            serial: observerSerial.add(1, ordering: .relaxed).newValue, callback: callback)
        observerRegistry.withLock { list in
            list.append(observer)
            list.sort { ($0.order, $0.serial) < ($1.order, $1.serial) }
        }
        observersVersion.add(1, ordering: .releasing)
        return observer
    }

    /// Removes an observer; it is not called again, even later in the current transition.
    public func removeObserver(_ observer: LoopObserver) {
        observer.invalidate()
        observerRegistry.withLock { $0.removeAll { $0 === observer } }
        observersVersion.add(1, ordering: .releasing)
    }

    // MARK: Annotations

    /// Attaches key/values to the work the loop is doing now (a request id, a route). They appear in the
    /// report of a stall that happens before ``clearAnnotations()``. Safe from any thread.
    /// The loop's lead-up names the items that ran with the annotations set.
    public func annotate(_ key: String, _ value: String) {
        annotationStore.set(key, value)
    }

    /// Removes the annotations set with ``annotate(_:_:)``.
    public func clearAnnotations() {
        annotationStore.removeAll()
    }

    /// The annotations in force now.
    package var annotations: [String: String] { annotationStore.values }

    // MARK: Running

    /// Runs the loop on the calling thread until ``stop()``.
    public func run() { _ = run(deadlineNanos: nil) }

    /// Runs the loop on the calling thread until ``stop()`` or until `duration` has passed.
    @discardableResult
    public func run(for duration: Duration) -> RunResult {
        run(deadlineNanos: sw_monotonic_ns() &+ duration.nanoseconds)
    }

    /// Asks the loop to return from `run` after the current callout. Safe from any thread.
    public func stop() {
        stopRequested.store(true, ordering: .releasing)
        _ = sw_eventfd_signal(wakeFD)
    }

    private func run(deadlineNanos: UInt64?) -> RunResult {
        let (claimed, _) = running.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing)
        guard claimed else { preconditionFailure("EventLoop '\(name)' is already running") }
        let tid = sw_gettid()
        loopThreadID.store(tid, ordering: .releasing)
        // Unblock the sampling signal here: this thread may have inherited a mask that blocks it (from a
        // libdispatch worker, or a parent process that spawned us from one), and then no sample could be taken.
        let thread = (try? SignalSampler.shared())?.registerCurrentThread() ?? SampledThread.current()
        runningThread.withLock { $0 = thread }
        mainQueueFD = mainQueueIntegration == .automatic && tid == getpid() ? sw_main_queue_handle() : -1
        state.runStarted(threadID: tid)
        defer {
            state.runEnded()
            runningThread.withLock { $0 = nil }
            stopRequested.store(false, ordering: .relaxed)
            loopThreadID.store(0, ordering: .releasing)
            running.store(false, ordering: .releasing)
        }

        transition(.entry, busyEdge: true)
        var result = RunResult.stopped
        while !stopRequested.load(ordering: .acquiring) {
            iterationCount &+= 1
            iterationsPublished.store(iterationCount, ordering: .relaxed)
            transition(.beforeTimers)
            if fireDueTimers() { calledOut = true }
            transition(.beforeSources)
            let ranWork = runPending()
            if ranWork { calledOut = true }
            if stopRequested.load(ordering: .acquiring) { break }

            let now = sw_monotonic_ns()
            if let deadlineNanos, now >= deadlineNanos {
                result = .timedOut
                break
            }
            if ranWork && hasPendingWork {
                // More work arrived while running: go round again without sleeping, but do not starve the
                // main queue.
                if mainQueueFD >= 0, sw_wait_readable(mainQueueFD, -1, 0) > 0 {
                    drainMainQueue()
                    calledOut = true
                }
                continue
            }
            var wakeAt = timers.nextDeadline
            if let deadlineNanos { wakeAt = min(wakeAt ?? deadlineNanos, deadlineNanos) }
            let timeout: Int64 = wakeAt.map { $0 > now ? Int64($0 - now) : 0 } ?? -1

            transition(.beforeWaiting)
            let ready = idleWait(timeoutNanos: timeout)
            transition(.afterWaiting, busyEdge: true)
            if ready & Int32(SW_WAIT_FD0) != 0 { sw_eventfd_drain(wakeFD) }
            if ready & Int32(SW_WAIT_FD1) != 0 {
                drainMainQueue()
                calledOut = true
            }
        }
        transition(.exit)
        return result
    }

    /// The loop's only blocking call. Never inlined and stably named, so a sample taken here reads as idle.
    @inline(never)
    func idleWait(timeoutNanos: Int64) -> Int32 {
        let ready = sw_wait_readable(wakeFD, mainQueueFD, timeoutNanos)
        return ready < 0 ? 0 : ready
    }

    private var hasPendingWork: Bool { pending.withLock { !$0.isEmpty } }

    private func drainMainQueue() {
        sw_eventfd_drain(mainQueueFD)
        var item = LeadUpItemTimer(state)
        guard item.isOn else { return sw_main_queue_drain() }
        let mark = annotationStore.mark
        item.begin(at: sw_monotonic_ns(), label: Self.mainQueueLabel)
        sw_main_queue_drain()
        item.end(
            at: sw_monotonic_ns(), label: annotationStore.label(since: mark, explicit: Self.mainQueueLabel), delay: 0)
    }

    private func runPending() -> Bool {
        let work = pending.withLock { queue -> [PendingWork] in
            defer { queue.removeAll(keepingCapacity: true) }
            return queue
        }
        var item = LeadUpItemTimer(state)
        guard item.isOn else {
            for entry in work { entry.block() }
            return !work.isEmpty
        }
        // One clock read per item: an item's end is the next one's start.
        var now = sw_monotonic_ns()
        for entry in work {
            let mark = annotationStore.mark
            item.begin(at: now, label: entry.label)
            entry.block()
            let end = sw_monotonic_ns()
            let delay = entry.enqueuedAt != 0 && now > entry.enqueuedAt ? now - entry.enqueuedAt : 0
            item.end(at: end, label: annotationStore.label(since: mark, explicit: entry.label), delay: delay)
            now = end
        }
        return !work.isEmpty
    }

    /// Returns true if any timer fired.
    private func fireDueTimers() -> Bool {
        guard !timers.isEmpty else { return false }
        let now = sw_monotonic_ns()
        var rescheduled: [(LoopTimer, UInt64)] = []
        var fired = false
        var item = LeadUpItemTimer(state)
        while let entry = timers.popDue(now: now) {
            fired = true
            if item.isOn {
                let mark = annotationStore.mark, label = entry.timer.label
                let start = sw_monotonic_ns()
                item.begin(at: start, label: label)
                entry.timer.block()
                item.end(
                    at: sw_monotonic_ns(), label: annotationStore.label(since: mark, explicit: label),
                    delay: start > entry.fireAt ? start - entry.fireAt : 0)
            } else {
                entry.timer.block()
            }
            let interval = entry.timer.intervalNanos
            if interval > 0, !entry.timer.isCancelled {
                // Skip fires missed while the loop was busy, as CFRunLoop does.
                var next = entry.fireAt &+ interval
                if next <= now { next = now &+ interval - (now &- entry.fireAt) % interval }
                rescheduled.append((entry.timer, next))
            }
        }
        for (timer, next) in rescheduled { timers.insert(timer, fireAt: next) }
        return fired
    }

    @inline(__always)
    private func transition(_ activity: LoopActivity, busyEdge: Bool = false) {
        sequence &+= 1
        state.record(activity, sequence: sequence, busyEdge: busyEdge, timeMoved: calledOut)
        calledOut = false
        if observersVersion.load(ordering: .relaxed) != observersSeen { refreshObservers() }
        if observedMask & activity.rawValue != 0 {
            notifyObservers(activity)
            calledOut = true
        }
    }

    @inline(never)
    private func refreshObservers() {
        observersSeen = observersVersion.load(ordering: .acquiring)
        activeObservers = observerRegistry.withLock { $0 }
        observedMask = activeObservers.reduce(0) { $0 | $1.activities.rawValue }
    }

    @inline(never)
    private func notifyObservers(_ activity: LoopActivity) {
        for observer in activeObservers where observer.activities.contains(activity) && observer.isValid {
            if !observer.repeats {
                guard observer.invalidate() else { continue }
                removeObserver(observer)
            }
            observer.callback(activity)
        }
    }
}

/// Work queued by ``EventLoop/perform(label:_:)``: the block, its lead-up label, and when it was queued
/// (CLOCK_MONOTONIC, 0 while no lead-up is recorded).
private struct PendingWork {
    var block: @Sendable () -> Void
    var label: UInt32
    var enqueuedAt: UInt64
}
