// SidecarDaemon: watches every process that publishes a heartbeat in one directory.
import CStallWatchCore
import Foundation
import StallWatch
import Synchronization

/// Scans the heartbeat directory periodically; starts a ``ThreadGroupWatcher`` for every segment that validates —
/// the heartbeat's loop thread (heartbeat mode), plus, from /proc evidence, every thread of that process that a
/// ``LoopThreadRule`` applying to its executable names (each its own detector, matched again at every scan) —
/// and drops it when its process exits. Segments that fail validation are reported once each (per distinct
/// reason) and skipped, never trusted.
package final class SidecarDaemon: Sendable {  // run() on one thread; stop() from any.
    /// What the daemon reports, on its own or a watcher's thread.
    package enum Event: Sendable {
        case skipped(path: String, SidecarError)
        /// A segment left by a process that no longer exists (killed before it could remove it) was deleted.
        case removedStale(path: String, pid: Int32)
        case target(pid: Int32, SidecarEvent)
    }

    package let directory: String
    package let configuration: StallWatchConfiguration
    package let scanInterval: Duration
    /// Loop threads to watch besides each heartbeat's own, by name (`[PROGRAM=]GLOB`).
    package let threadRules: [LoopThreadRule]
    private let onEvent: @Sendable (Event) -> Void
    private let stopRequested = Atomic<Bool>(false)
    private let wakeup = DispatchSemaphore(value: 0)
    private let watchers = Mutex<[String: (group: ThreadGroupWatcher, done: DispatchSemaphore)]>([:])

    /// - Parameters:
    ///   - directory: Where segments are published (`heartbeatDirectory`, default `/dev/shm`).
    ///   - configuration: Report directory, sampling; each target's thresholds come from its segment.
    ///   - scanInterval: Time between scans of the directory (and between matches of `threadRules`).
    ///   - threadRules: Further loop threads of each target, by name; a rule with a `program` part applies only
    ///     to processes whose executable's file name matches it.
    package init(
        directory: String, configuration: StallWatchConfiguration, scanInterval: Duration = .seconds(1),
        threadRules: [LoopThreadRule] = [], onEvent: @escaping @Sendable (Event) -> Void
    ) {
        self.directory = directory
        self.configuration = configuration
        self.scanInterval = scanInterval
        self.threadRules = threadRules
        self.onEvent = onEvent
    }

    /// The loop name of thread `threadID` of the process `pid` watched now, and the process's executable (for
    /// metrics labels); nil when that thread is not watched.
    package func watchedLoop(of pid: Int32, threadID: Int32) -> (loopName: String, executable: String)? {
        let group = watchers.withLock { $0.values.first { $0.group.processID == pid }?.group }
        return group?.loopName(ofThread: threadID).map { ($0, ProcessIdentity.of(pid: pid).executable) }
    }

    /// The watchers that have not turned for longer than `allowanceNanos` (or three of their poll intervals, if
    /// longer), with how long: they are stuck, and their processes unwatched. Any thread.
    package func stuckWatchers(allowanceNanos: UInt64) -> [(pid: Int32, sinceNanos: UInt64)] {
        let now = sw_monotonic_ns()
        return watchers.withLock { watchers in
            watchers.values.flatMap(\.group.watchers).compactMap { watcher -> (pid: Int32, sinceNanos: UInt64)? in
                let idle = now &- min(now, watcher.lastTurnNanos)
                guard idle > max(allowanceNanos, 3 &* watcher.pollIntervalNanos) else { return nil }
                return (watcher.options.pid, idle)
            }
        }.sorted { $0.pid < $1.pid }
    }

    /// The pids being watched now.
    var watchedPIDs: [Int32] { watchers.withLock { $0.values.map { $0.group.processID }.sorted() } }

    /// The threads of `pid` being watched now.
    func watchedThreads(of pid: Int32) -> [Int32] {
        let group = watchers.withLock { $0.values.first { $0.group.processID == pid }?.group }
        return group?.watchers.map(\.threadID) ?? []
    }

    /// Scans and watches until ``stop()``; then stops every watcher (stalls in progress become `unrecovered`).
    ///
    /// - Parameter onScan: called on this thread after each scan with the number of processes watched (the
    ///   daemon's own sign of life: `stallwatch daemon` sends READY=1 after the first and pings systemd's
    ///   watchdog only while scans keep coming).
    /// - Throws: `.systemCall` when the directory cannot be read at all.
    package func run(onScan: (_ watched: Int) -> Void = { _ in }) throws(SidecarError) {
        var info = stat()
        guard stat(directory, &info) == 0, info.st_mode & S_IFMT == S_IFDIR else {
            throw SidecarError(
                .systemCall, "heartbeat directory \(directory) does not exist or is not a directory",
                context: ["path": directory])
        }
        var reported: [String: String] = [:]
        while !stopRequested.load(ordering: .acquiring) {
            let files = HeartbeatReader.segmentFiles(in: directory)
            let present = Set(files.map(\.path))
            reported = reported.filter { present.contains($0.key) }
            for file in files where watchers.withLock({ $0[file.path] == nil }) {
                var options = TargetWatcher.Options(pid: file.pid, configuration: configuration)
                options.mode = .heartbeat(path: file.path)
                let executable = ProcessIdentity.of(pid: file.pid).executable
                var groupOptions = ThreadGroupWatcher.Options(
                    base: options, fixedThreads: [nil],
                    rules: threadRules.filter { $0.applies(toExecutable: executable) })
                groupOptions.ruleMode = .proc
                groupOptions.rescanInterval = scanInterval
                do {
                    let group = try ThreadGroupWatcher(options: groupOptions) { [onEvent] event in
                        onEvent(.target(pid: file.pid, event))
                    }
                    reported[file.path] = nil
                    start(group, path: file.path)
                } catch {
                    if Self.removeIfStale(file.path, pid: file.pid) {
                        reported[file.path] = nil
                        onEvent(.removedStale(path: file.path, pid: file.pid))
                        continue
                    }
                    if reported[file.path] != error.message {
                        reported[file.path] = error.message
                        onEvent(.skipped(path: file.path, error))
                    }
                }
            }
            onScan(watchers.withLock { $0.count })
            _ = wakeup.wait(
                timeout: .now() + .nanoseconds(Int(clamping: scanInterval.nanoseconds)))
        }
        let running = watchers.withLock { $0 }
        for (_, entry) in running { entry.group.stop(reason: "the daemon stopped while the loop was still stuck") }
        for (_, entry) in running { entry.done.wait() }
    }

    /// Deletes a segment whose process is gone (`kill(pid, 0)` fails with ESRCH), if it is a regular file owned by
    /// this user: a publisher killed with SIGKILL cannot remove its own. A live pid (even a reused one) never
    /// loses its file here.
    static func removeIfStale(_ path: String, pid: Int32) -> Bool {
        guard pid > 0, kill(pid, 0) == -1, errno == ESRCH else { return false }
        var info = stat()
        guard lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_uid == geteuid() else { return false }
        return unlink(path) == 0
    }

    /// Asks ``run()`` to return. Any thread.
    package func stop() {
        stopRequested.store(true, ordering: .releasing)
        wakeup.signal()
    }

    private func start(_ group: ThreadGroupWatcher, path: String) {
        let done = DispatchSemaphore(value: 0)
        watchers.withLock { $0[path] = (group, done) }
        do {
            // Not joined: `done` says when it has finished (dropping the handle detaches it).
            _ = try NamedThread(name: "sw-group-\(group.processID)") { [self] in
                group.run()
                // Dropped once its process is gone; a restarted process publishes a new segment.
                watchers.withLock { _ = $0.removeValue(forKey: path) }
                done.signal()
            }
        } catch {
            watchers.withLock { _ = $0.removeValue(forKey: path) }
            onEvent(.skipped(path: path, SidecarError(.systemCall, error.message, context: error.context)))
        }
    }
}
