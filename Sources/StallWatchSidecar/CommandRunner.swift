// CommandRunner: `stallwatch run`'s process handling — start a command, watch its loop, pass signals on, wait.
import StallWatch
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Starts a command as our child and watches its loop until it exits, as `stallwatch run -- CMD` does.
///
/// Every catchable signal sent to this process (``SignalRelay/forwardable``) is forwarded to the child, except
/// those the terminal sent to the whole foreground group, which the child (in that group) has already; a stop
/// (^Z, SIGTSTP) waits for the capture under way, and one sent to `run` alone is passed on to the child and
/// undone when `run` continues. The watcher is given a moment to find the child's heartbeat before it settles for /proc evidence; a stall still
/// going when the child exits is written `unrecovered`.
package enum CommandRunner {
    /// What the runner tells its caller, on the watching thread.
    package enum Event: Sendable {
        /// An event of the watcher (``TargetWatcher``).
        case target(SidecarEvent)
        /// The child could not be watched (it keeps running; its status is still returned).
        case watchFailed(SidecarError)
    }

    /// Runs `arguments` (searched in PATH) and watches it with `options` (whose `pid` is replaced by the child's).
    ///
    /// - Parameters:
    ///   - heartbeatWait: How long to wait for the child to publish a heartbeat before watching it from /proc
    ///     (not waited with `options.mode == .proc`).
    ///   - onEvent: Called on the watching thread.
    /// - Returns: The child's exit status, or 128 + the signal that killed it (as shells report it).
    /// - Throws: `.spawnFailed` when the command cannot be started.
    package static func run(
        _ arguments: [String], options: TargetWatcher.Options, heartbeatWait: Duration,
        onEvent: @escaping @Sendable (Event) -> Void
    ) throws(SidecarError) -> Int32 {
        // Forward what the child did not get from the terminal itself; we exit when it does.
        let child = Mutex<ChildProcess?>(nil)
        SignalRelay.install(SignalRelay.forwardable) { delivery in
            guard !delivery.fromKernel else { return }
            child.withLock { $0?.send(delivery.signal) }
        } resumed: { delivery in
            if !delivery.fromKernel { child.withLock { $0?.send(SIGCONT) } }
        }
        let started = try ChildProcess.spawn(arguments)
        child.withLock { $0 = started }
        var options = options
        options.pid = started.pid

        let watcherBox = Mutex<TargetWatcher?>(nil)
        let stopped = Atomic<Bool>(false)
        let watching = Result { () throws(StallWatchError) in
            try NamedThread(name: "stallwatch-run") { [options] in
                watch(options, heartbeatWait: heartbeatWait, stopped: stopped, watcherBox: watcherBox, onEvent: onEvent)
            }
        }
        if case .failure(let error) = watching {
            onEvent(.watchFailed(SidecarError(.systemCall, "cannot watch the command: \(error.message)")))
        }
        let status = started.wait()
        stopped.store(true, ordering: .releasing)
        watcherBox.withLock {
            $0?.stop(reason: "the command exited (status \(status)) while its loop was still stuck")
        }
        if case .success(let thread) = watching { thread.join() }
        watcherBox.withLock { $0?.stop() }
        return status
    }

    /// The watching thread: waits for the child's heartbeat (or settles for /proc evidence), then watches until
    /// `stopped`.
    private static func watch(
        _ options: TargetWatcher.Options, heartbeatWait: Duration, stopped: borrowing Atomic<Bool>,
        watcherBox: borrowing Mutex<TargetWatcher?>, onEvent: @escaping @Sendable (Event) -> Void
    ) {
        let deadline = ContinuousClock.now + heartbeatWait
        var watcher: TargetWatcher?
        while !stopped.load(ordering: .acquiring) {
            do throws(SidecarError) {
                let candidate = try TargetWatcher(options: options) { onEvent(.target($0)) }
                if candidate.source == .heartbeat || options.mode == .proc || ContinuousClock.now >= deadline {
                    watcher = candidate
                    break
                }
            } catch {
                if error.code != .noSuchProcess { onEvent(.watchFailed(error)) }  // else: it exited already
                return
            }
            usleep(20_000)
        }
        guard let watcher else { return }
        watcherBox.withLock { $0 = watcher }
        if stopped.load(ordering: .acquiring) { return }
        _ = watcher.run()
    }
}
