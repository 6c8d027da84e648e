// NamedThreadWatcher: the thread watchdog's body: one /proc stall follower per thread whose name matches.
import CStallWatchCore
import Dispatch
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Follows the stalls of every thread of this process whose name matches a glob, from one thread.
///
/// Each matched thread has its own ``StallFollower`` (and recorder, named after the thread) over a
/// ``ProcProgressProbe``: the sidecar's zero-instrumentation rules, applied to threads of this process (its own
/// idle wait learned, nested waits busy, the counter moves of a capture discounted). After a look at all of them
/// the thread sleeps until the earliest deadline any of them gave, at most one poll interval — the longer idle
/// poll interval while every thread sits in its idle wait — (until the next rescan while no thread matches). The thread list is
/// read again every ``rescanNanos``: threads that appear are followed from then on, threads that exited are
/// dropped (a stall still being followed is finished as `unrecovered`).
final class NamedThreadWatcher: @unchecked Sendable {  // Runs on the thread watchdog's thread only, after hand-off.
    /// A followed thread, as ``ThreadWatchdog/watchedThreads`` shows it.
    struct Watched: Sendable, Equatable {
        var threadID: Int32
        var name: String
    }

    private let pattern: String
    private let configuration: StallWatchConfiguration
    private let emit: @Sendable (StallEvent) -> Void
    private let isStopping: @Sendable () -> Bool
    private let wakeup: DispatchSemaphore
    private let pollNanos: UInt64
    /// The poll interval while every followed thread is in its idle wait.
    private let idlePollNanos: UInt64
    private let rescanNanos: UInt64
    /// One sampler (one unwinder and its caches) for every thread.
    private let target: StallRecorder.Target
    private var followers: [Int32: StallFollower<ProcProgressProbe>] = [:]
    private var nextRescan: UInt64 = 0
    private var warmedUp = false
    /// What the watching thread follows now, for other threads to read.
    let watched = Mutex<[Watched]>([])

    init(
        pattern: String, configuration: StallWatchConfiguration, pollNanos: UInt64, idlePollNanos: UInt64? = nil,
        rescanNanos: UInt64, wakeup: DispatchSemaphore, emit: @escaping @Sendable (StallEvent) -> Void,
        isStopping: @escaping @Sendable () -> Bool
    ) {
        self.pattern = pattern
        self.configuration = configuration
        self.pollNanos = pollNanos
        self.idlePollNanos = max(pollNanos, idlePollNanos ?? pollNanos)
        self.rescanNanos = rescanNanos
        self.wakeup = wakeup
        self.emit = emit
        self.isStopping = isStopping
        var target = StallRecorder.Target.inProcess()
        target.detectionSource = .proc
        target.phaseKnown = false
        self.target = target
    }

    /// Follows the matching threads until stopped; `ready` is called after the first look at each of them (their
    /// idle waits are being learned from then on).
    func run(ready: () -> Void = {}) {
        let me = sw_gettid()
        var first = true
        while !isStopping() {
            var now = sw_monotonic_ns()
            if now >= nextRescan {
                rescan(excluding: me)
                nextRescan = now &+ rescanNanos
            }
            var looks = StallFollower<ProcProgressProbe>.Looks()
            for tid in Array(followers.keys) where !looks.fold(followers[tid]!.look(timedOut: false)) { drop(tid) }
            // True while every followed thread sits in its idle wait (the detector parks on it).
            let allIdle = !looks.lookAgain && looks.deadline == nil
            // With nothing to follow, the next look is the next rescan.
            var deadline = min(nextRescan, looks.lookAgain ? now : looks.deadline ?? nextRescan)
            // One poll interval while a thread is busy (its stall is seen as it crosses the threshold); the longer
            // idle interval while all of them are idle (a thread that leaves its wait is seen that much later).
            if !followers.isEmpty { deadline = min(deadline, now &+ (allIdle ? idlePollNanos : pollNanos)) }
            if first {
                first = false
                ready()
            }
            now = sw_monotonic_ns()
            if deadline > now { _ = wakeup.wait(timeout: .now() + .nanoseconds(Int(deadline - now))) }
        }
        for tid in followers.keys {
            followers[tid]!.recorder.abandon(
                now: sw_monotonic_ns(), reason: "the thread watchdog stopped while the thread was still stuck")
            followers[tid]!.recorder.waitForLineFills()
        }
        followers.removeAll()
        watched.withLock { $0.removeAll() }
    }

    /// Starts following matching threads that are not followed yet. StallWatch's own threads never match.
    private func rescan(excluding me: Int32) {
        let pid = getpid()
        var added = false
        var matching: [Int32: String] = [:]
        for tid in ThreadProbe.threadIDs(pid: pid) where tid != me {
            if let name = ProcDirectory(processID: pid, threadID: tid).comm(), Self.matches(name, pattern) {
                matching[tid] = name
            }
        }
        // A thread a loop started and never named has the loop's name: judged once seen idle like a loop.
        let inherited = ThreadProbe.namedAfterAnOlderThread(of: pid, among: matching)
        for (tid, name) in matching.sorted(by: { $0.key < $1.key }) where followers[tid] == nil {
            var probe = ProcProgressProbe(processID: pid, threadID: tid, now: sw_monotonic_ns())
            probe.judgedOnceSeenIdle = inherited.contains(tid)
            let recorder = StallRecorder(configuration: configuration, loopName: name, target: target, emit: emit)
            if !warmedUp {
                recorder.warmUp()
                warmedUp = true
            }
            followers[tid] = StallFollower(
                source: probe, recorder: recorder,
                configuration: configuration.detectorConfiguration, watcher: .threadWatchdog)
            watched.withLock { $0.append(Watched(threadID: tid, name: name)) }
            added = true
        }
        if added { watched.withLock { $0.sort { $0.threadID < $1.threadID } } }
    }

    private func drop(_ tid: Int32) {
        followers[tid] = nil
        watched.withLock { $0.removeAll { $0.threadID == tid } }
    }

    /// Whether a thread named `name` (its `comm`) is watched for `pattern` (a shell glob): never StallWatch's
    /// own threads (`stallwatch-…`), whatever the pattern.
    static func matches(_ name: String, _ pattern: String) -> Bool {
        !name.hasPrefix("stallwatch") && fnmatch(pattern, name, 0) == 0
    }
}
