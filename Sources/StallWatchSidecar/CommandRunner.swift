// CommandRunner: `stallwatch run`'s process handling — start a command, watch its loop, pass signals on, wait.
import Foundation
import StallWatch
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Starts a command as our child and watches its loop until it exits, as `stallwatch run -- CMD` does.
///
/// SIGINT, SIGTERM and SIGHUP sent to this process are forwarded to the child (``TerminationSignals``); the
/// watcher is given a moment to find the child's heartbeat before it settles for /proc evidence; a stall still
/// going when the child exits is written `unrecovered`.
public enum CommandRunner {
    /// What the runner tells its caller, on the watching thread.
    public enum Event: Sendable {
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
    public static func run(
        _ arguments: [String], options: TargetWatcher.Options, heartbeatWait: Duration,
        onEvent: @escaping @Sendable (Event) -> Void
    ) throws(SidecarError) -> Int32 {
        // Forward SIGINT/SIGTERM/SIGHUP to the child; we exit when it does.
        let child = Mutex<ChildProcess?>(nil)
        TerminationSignals.install { signal in child.withLock { $0?.send(signal) } }
        let started = try ChildProcess.spawn(arguments)
        child.withLock { $0 = started }
        var options = options
        options.pid = started.pid

        let done = DispatchSemaphore(value: 0)
        let watcherBox = Mutex<TargetWatcher?>(nil)
        let stopped = Atomic<Bool>(false)
        let watchOptions = options
        let waitNanos =
            heartbeatWait.components.seconds * 1_000_000_000 + heartbeatWait.components.attoseconds / 1_000_000_000
        let thread = Thread {
            defer { done.signal() }
            // Give the command time to publish its heartbeat before settling for /proc evidence.
            let deadline = DispatchTime.now() + .nanoseconds(Int(waitNanos))
            var watcher: TargetWatcher?
            while !stopped.load(ordering: .acquiring) {
                do throws(SidecarError) {
                    let candidate = try TargetWatcher(options: watchOptions) { onEvent(.target($0)) }
                    if candidate.source == "heartbeat" || watchOptions.mode == .proc || DispatchTime.now() >= deadline {
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
        thread.name = "stallwatch-run-watch"
        thread.start()
        let status = started.wait()
        stopped.store(true, ordering: .releasing)
        watcherBox.withLock {
            $0?.stop(reason: "the command exited (status \(status)) while its loop was still stuck")
        }
        done.wait()
        watcherBox.withLock { $0?.stop() }
        return status
    }
}
