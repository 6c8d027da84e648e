// ThreadWatchdog: watches event-loop threads of this process that nobody instrumented, found by name.
import CStallWatchCore
import Dispatch
import Synchronization

/// Watches threads of this process by name (`NIO-ELT-*`, `worker-[0-9]*`) from /proc evidence alone, so an
/// event loop StallWatch cannot instrument — SwiftNIO's, a C library's — is watched without importing it.
///
/// ```swift
/// let threads = try ThreadWatchdog.start(threadsNamed: "NIO-ELT-*", configuration: .load())
/// // …
/// threads.stop()
/// ```
///
/// or, with `"watchThreads": "NIO-ELT-*"` in the configuration (`STALLWATCH_WATCH_THREADS`),
/// `try ThreadWatchdog.start(configuration: .load())`.
///
/// Each matching thread gets its own detector, with the rules of the sidecar's zero-instrumentation mode
/// (``ProcProgressProbe``): the thread's own idle wait is learned as it idles (its `epoll_wait` on its own
/// descriptor), any other wait — a nested `poll`, a lock, a sleep — is busy, and leaving a system call or making
/// new ones is progress. No progress for the threshold is a stall of that thread: its report names the thread
/// in `loop` (`name` is the thread's name, `threadId` its id), `detection.source` is `proc`, the phase is
/// `unknown`, and the samples come from the non-interrupting capture. Threads that appear later are picked up
/// within ``rescanInterval``; threads that exit are dropped.
///
/// Start it while the loops run normally (a service's start-up, not in a stall): a thread whose first look finds
/// it in a futex wait learns that wait as its idle one. The watching thread (`stallwatch-threads`) polls /proc
/// (it cannot signal) every `thresholdMs / 5` (at least 10 ms) while any followed thread is busy, every
/// `thresholdMs / 2` while all of them sit in their idle waits — a stall that begins just after such a look is dated
/// from the thread's CPU time, run-queue wait and time since it last ran (``ProcProgressProbe``), so it is
/// still detected as its threshold is crossed, not half a threshold late — and once per ``rescanInterval`` while
/// none matches.
public final class ThreadWatchdog: @unchecked Sendable {
    // @unchecked Sendable: `watcher` changes only in `lock`, before its thread starts and after it is joined.
    /// The shell glob thread names are matched against (`comm`, at most 15 bytes).
    let pattern: String
    package let configuration: StallWatchConfiguration
    /// How often the list of threads is read again for new ones.
    package let rescanInterval: Duration
    private let onEvent: @Sendable (StallEvent) -> Void
    private let stopRequested = StopFlag()
    /// The watching thread's id while it runs (0 before the first start).
    private let watchingThread = ThreadIDCell()
    private let wakeup = DispatchSemaphore(value: 0)
    private let lock = Mutex<NamedThread?>(nil)
    private var watcher: NamedThreadWatcher?

    /// - Parameters:
    ///   - pattern: A shell glob for thread names; nil: `configuration.watchThreads`.
    ///   - configuration: Thresholds, sampling and report settings.
    ///   - rescanInterval: How often new threads are looked for.
    ///   - onEvent: Called on the watching thread for every stall event. Keep it short.
    /// - Throws: `.invalidConfiguration` when there is no pattern.
    package init(
        threadsNamed pattern: String? = nil, configuration: StallWatchConfiguration = StallWatchConfiguration(),
        rescanInterval: Duration = .seconds(1), onEvent: @escaping @Sendable (StallEvent) -> Void = { _ in }
    ) throws(StallWatchError) {
        let glob = pattern ?? configuration.watchThreads
        guard !glob.isEmpty else {
            throw StallWatchError(
                .invalidConfiguration, "no thread name pattern: pass threadsNamed: or set watchThreads",
                context: ["key": "watchThreads"])
        }
        self.pattern = glob
        self.configuration = configuration
        self.rescanInterval = rescanInterval
        self.onEvent = onEvent
    }

    /// Creates a thread watchdog and starts it: the one line that watches a SwiftNIO service's event loops.
    ///
    /// - Throws: What ``init(threadsNamed:configuration:rescanInterval:onEvent:)`` and ``start()`` throw.
    @discardableResult
    public static func start(
        threadsNamed pattern: String? = nil, configuration: StallWatchConfiguration = StallWatchConfiguration(),
        onEvent: @escaping @Sendable (StallEvent) -> Void = { _ in }
    ) throws(StallWatchError) -> ThreadWatchdog {
        let watchdog = try ThreadWatchdog(threadsNamed: pattern, configuration: configuration, onEvent: onEvent)
        try watchdog.start()
        return watchdog
    }

    /// Where this watchdog writes its reports.
    package var reportDirectory: String { configuration.reportDirectoryPath }

    package var isRunning: Bool { lock.withLock { $0 != nil } }

    /// The threads followed now (id and name at the time they were found), by thread id.
    public var watchedThreads: [(threadID: Int32, name: String)] {
        let current = lock.withLock { _ in watcher }
        return (current?.watched.withLock { $0 } ?? []).map { ($0.threadID, $0.name) }
    }

    /// Starts the watching thread and returns after its first look at every matching thread. Does nothing when
    /// running or when `configuration.enabled` is false.
    ///
    /// - Throws: `.systemCall` if the thread cannot start.
    package func start() throws(StallWatchError) {
        guard configuration.enabled else { return }
        try lock.withLock { (thread: inout NamedThread?) throws(StallWatchError) in
            guard thread == nil else { return }
            stopRequested.value.store(false, ordering: .relaxed)
            while wakeup.wait(timeout: .now()) == .success {}
            let threshold = configuration.intervals.threshold
            let poll = max(10_000_000, threshold / 5)
            let idlePoll = max(10_000_000, threshold / 2)
            let rescan = max(1_000_000, rescanInterval.nanoseconds)
            let watcher = NamedThreadWatcher(
                pattern: pattern, configuration: configuration, pollNanos: poll, idlePollNanos: idlePoll,
                rescanNanos: rescan, wakeup: wakeup,
                emit: onEvent
            ) { [stopRequested] in stopRequested.value.load(ordering: .acquiring) }
            let ready = DispatchSemaphore(value: 0)
            thread = try NamedThread(name: "stallwatch-threads") { [watchingThread] in
                watchingThread.value.store(sw_gettid(), ordering: .releasing)
                watcher.run { ready.signal() }
            }
            ready.wait()
            self.watcher = watcher
        }
    }

    /// The id of the thread that watches, once ``start()`` has returned; nil before.
    package var watchingThreadID: Int32? {
        let tid = watchingThread.value.load(ordering: .acquiring)
        return tid == 0 ? nil : tid
    }

    /// Stops and joins the watching thread. A stall in progress is written as `unrecovered`.
    public func stop() {
        lock.withLock { thread in
            guard let running = thread else { return }
            stopRequested.value.store(true, ordering: .releasing)
            wakeup.signal()
            running.join()
            thread = nil
            watcher = nil
        }
    }

    deinit { stop() }

    /// Shared with the watching thread's closure without keeping the watchdog alive.
    private final class StopFlag: Sendable {
        let value = Atomic<Bool>(false)
    }

    private final class ThreadIDCell: Sendable {
        let value = Atomic<Int32>(0)
    }
}
