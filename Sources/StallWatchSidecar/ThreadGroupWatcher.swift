// ThreadGroupWatcher: the loop threads of one process, one TargetWatcher (one detector) each, kept current.
import Dispatch
import StallWatch
import Synchronization

/// Watches several loop threads of one process — threads named on the command line, and every thread whose
/// name a ``LoopThreadRule`` matches — each with its own ``TargetWatcher`` on a thread of its own, so each has its
/// own detector and its reports name it.
///
/// Thread names change while a service runs (a pool starts its workers late, a thread renames itself once it
/// knows its job), so the rules are matched again every ``Options/rescanInterval``: a thread that now matches gets a
/// watcher, one renamed away loses its watcher (``SidecarEvent/threadDropped(pid:threadID:reason:)``), one that
/// exited has already ended its own. Between rescans the group sleeps on a semaphore; without rules it does not
/// wake at all until a watcher ends.
///
/// A thread starts with its creator's name on Linux: a thread that a loop thread starts and never names (a
/// background worker of an event loop's handler) matches the loop's rule without being a loop. So of several
/// matching threads with one name, all but the oldest are judged only once seen in an idle wait of their own
/// (``TargetWatcher/Options/judgedOnceSeenIdle``); a loop shows one within its first looks.
package final class ThreadGroupWatcher: Sendable {  // run() on one thread; stop() from any.
    package struct Options: Sendable {
        /// What every watcher starts from: the pid, mode, configuration; `threadID` is set per thread.
        package var base: TargetWatcher.Options
        /// Threads watched whatever their name; nil stands for the default thread (the heartbeat's loop thread,
        /// else the main thread).
        package var fixedThreads: [Int32?]
        /// Threads watched while their name matches one of these (only the `threads` globs are used here).
        package var rules: [LoopThreadRule]
        /// The mode of rule-matched threads' watchers; nil: `base.mode`. The daemon uses `.proc`, since a
        /// heartbeat segment speaks for its own loop thread only.
        var ruleMode: TargetWatcher.Mode?
        /// Time between matches of the rules against the process's threads.
        package var rescanInterval: Duration = .seconds(1)

        package init(base: TargetWatcher.Options, fixedThreads: [Int32?], rules: [LoopThreadRule] = []) {
            self.base = base
            self.fixedThreads = fixedThreads
            self.rules = rules
        }
    }

    private struct Entry {
        let watcher: TargetWatcher
        /// Named on the command line (or the heartbeat's): kept whatever its name.
        let fixed: Bool
        /// Renamed away and asked to stop; ends soon.
        var dropped = false
    }

    package let options: Options
    package var processID: Int32 { options.base.pid }
    private let startTimeTicks: UInt64?
    private let onEvent: @Sendable (SidecarEvent) -> Void
    private let entries = Mutex<[Int32: Entry]>([:])
    /// Signalled by a stop and by every watcher that ends.
    private let wakeup = DispatchSemaphore(value: 0)
    private let stopRequested = Atomic<Bool>(false)
    private let stopReason = Mutex<String?>(nil)

    /// Creates the watchers of the fixed threads and of the threads the rules match now (not started yet).
    ///
    /// - Throws: what ``TargetWatcher/init(options:onEvent:)`` throws for a fixed thread; a rule-matched thread
    ///   that exits before its watcher is made is skipped.
    package init(options: Options, onEvent: @escaping @Sendable (SidecarEvent) -> Void) throws(SidecarError) {
        self.options = options
        self.onEvent = onEvent
        startTimeTicks = HeartbeatPublisher.startTimeTicks(pid: options.base.pid)
        var made: [Int32: Entry] = [:]
        for tid in options.fixedThreads {
            var threadOptions = options.base
            threadOptions.threadID = tid
            let watcher = try TargetWatcher(options: threadOptions, onEvent: onEvent)
            made[watcher.threadID] = Entry(watcher: watcher, fixed: true)
        }
        entries.withLock { $0 = made }
        let matching = matchingThreads()
        let inherited = ThreadProbe.namedAfterAnOlderThread(of: options.base.pid, among: matching)
        for (tid, _) in matching where made[tid] == nil {
            if let watcher = makeRuleWatcher(tid, nameInherited: inherited.contains(tid)) {
                entries.withLock { $0[tid] = Entry(watcher: watcher, fixed: false) }
            }
        }
    }

    /// The watchers running or about to run, by thread id.
    package var watchers: [TargetWatcher] {
        entries.withLock { $0.values.map(\.watcher) }.sorted { $0.threadID < $1.threadID }
    }

    /// The loop name of the watcher of thread `tid` (for metrics labels); nil when that thread is not watched.
    package func loopName(ofThread tid: Int32) -> String? { entries.withLock { $0[tid]?.watcher.loopName } }

    /// Asks ``run()`` to return; every watcher stops, a stall being followed is written `unrecovered` with
    /// `reason`. Any thread.
    package func stop(reason: String? = nil) {
        stopReason.withLock { $0 = $0 ?? reason }
        stopRequested.store(true, ordering: .releasing)
        wakeup.signal()
    }

    /// Runs every watcher and keeps the set current until ``stop(reason:)``, until the process exits, or — without
    /// rules — until every fixed thread's watcher has ended. Blocks the calling thread.
    package func run() {
        for tid in entries.withLock({ Array($0.keys) }).sorted() { start(tid) }
        while !stopRequested.load(ordering: .acquiring) {
            guard TargetProgress.alive(processID: processID, startTimeTicks: startTimeTicks) else { break }
            if options.rules.isEmpty {
                if entries.withLock({ $0.isEmpty }) { break }
                wakeup.wait()
            } else {
                rescan()
                _ = wakeup.wait(
                    timeout: .now() + .nanoseconds(Int(clamping: options.rescanInterval.nanoseconds)))
            }
        }
        if stopRequested.load(ordering: .acquiring) {
            let reason = stopReason.withLock { $0 }
            for entry in entries.withLock({ Array($0.values) }) { entry.watcher.stop(reason: reason) }
        }
        // Watchers of a process that exited notice it at their next look and end on their own.
        while !entries.withLock({ $0.isEmpty }) { wakeup.wait() }
    }

    /// Matches the rules again: watches threads that now match, drops those renamed away.
    private func rescan() {
        let matching = matchingThreads()
        let inherited = ThreadProbe.namedAfterAnOlderThread(of: processID, among: matching)
        var dropped: [(TargetWatcher, String)] = []
        var added: [Int32] = []
        for (tid, _) in matching where entries.withLock({ $0[tid] == nil }) {
            guard let watcher = makeRuleWatcher(tid, nameInherited: inherited.contains(tid)) else { continue }
            entries.withLock { $0[tid] = Entry(watcher: watcher, fixed: false) }
            added.append(tid)
        }
        entries.withLock { entries in
            for (tid, entry) in entries where !entry.fixed && !entry.dropped && matching[tid] == nil {
                // A thread that exited has no name any more; its watcher ends by itself.
                guard let name = ProcDirectory(processID: processID, threadID: tid).comm() else { continue }
                entries[tid]?.dropped = true
                dropped.append((entry.watcher, name))
            }
        }
        for (watcher, name) in dropped {
            let reason = "the thread was renamed \"\(name)\", which no thread rule matches"
            watcher.stop(reason: reason + ", while the loop was still stuck")
            onEvent(.threadDropped(pid: processID, threadID: watcher.threadID, reason: reason))
        }
        for tid in added.sorted() { start(tid) }
    }

    private func matchingThreads() -> [Int32: String] {
        LoopThreadRule.matchingThreads(of: processID, rules: options.rules)
    }

    /// A watcher of rule-matched thread `tid`; one whose name an older thread has (`nameInherited`) is judged
    /// only once seen in an idle wait of its own.
    private func makeRuleWatcher(_ tid: Int32, nameInherited: Bool) -> TargetWatcher? {
        var threadOptions = options.base
        threadOptions.threadID = tid
        threadOptions.judgedOnceSeenIdle = nameInherited
        if let mode = options.ruleMode { threadOptions.mode = mode }
        return try? TargetWatcher(options: threadOptions, onEvent: onEvent)
    }

    private func start(_ tid: Int32) {
        guard let watcher = entries.withLock({ $0[tid]?.watcher }) else { return }
        let finished: @Sendable () -> Void = { [self] in
            entries.withLock { _ = $0.removeValue(forKey: tid) }
            wakeup.signal()
        }
        do {
            // Not joined: the entry's removal says when it has finished (dropping the handle detaches it).
            _ = try NamedThread(name: "sw-watch-\(tid)") {
                _ = watcher.run()
                finished()
            }
        } catch {
            finished()
        }
    }
}
