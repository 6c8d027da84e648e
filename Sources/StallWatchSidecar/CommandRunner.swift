// CommandRunner: `stallwatch run`'s process handling — start a command, watch its loop, pass signals on, wait.
import StallWatch
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Starts a command as our child and watches its loop until it exits, as `stallwatch run -- CMD` does.
///
/// Every catchable signal sent to this process (``SignalRelay/forwardable``) is forwarded to the child once,
/// unless the child received it already: sent to the whole process group or cgroup, which the child shares
/// (``SignalForwarder`` says how that is told). A stop (^Z, SIGTSTP) waits for the capture under way; one that
/// was forwarded (sent to `run` alone) is undone for the child when `run` continues. The watcher is given a moment
/// to find the child's heartbeat before it settles for /proc evidence; a stall still going when the child exits is
/// written `unrecovered`.
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
    ///   - preload: Libraries put first in the child's `LD_PRELOAD` (the lock book: ``lockBookLibrary()``).
    ///   - heartbeatWait: How long to wait for the child to publish a heartbeat before watching it from /proc
    ///     (not waited with `options.mode == .proc`).
    ///   - onEvent: Called on the watching thread.
    /// - Returns: The child's exit status, or 128 + the signal that killed it (as shells report it).
    /// - Throws: `.spawnFailed` when the command cannot be started.
    package static func run(
        _ arguments: [String], options: TargetWatcher.Options, preload: [String] = [], heartbeatWait: Duration,
        onEvent: @escaping @Sendable (Event) -> Void
    ) throws(SidecarError) -> Int32 {
        // The witness first, so that it is in the process group and cgroup before the child is; then the relay,
        // which forwards what the child did not receive itself. We exit when the child does.
        let witness = Result { () throws(SidecarError) in
            try SignalWitness.start(signals: SignalRelay.forwardable + SignalRelay.jobControl)
        }
        if case .failure(let error) = witness {
            onEvent(.watchFailed(SidecarError(error.code, error.message + "; signals are forwarded without it")))
        }
        // Until the child runs, signals are kept (it cannot have them), and forwarded once it does; a stop is
        // `run`'s own then.
        let forwarding = Mutex<(forwarder: SignalForwarder?, early: [SignalRelay.Delivery])>((nil, []))
        let stopForwarded = Atomic<Bool>(false)
        SignalRelay.install(SignalRelay.forwardable) { delivery in
            let current = forwarding.withLock { state -> SignalForwarder? in
                if state.forwarder == nil, !SignalRelay.jobControl.contains(delivery.signal) {
                    state.early.append(delivery)
                }
                return state.forwarder
            }
            guard let current else { return }
            let forward = !current.childHasAlready(delivery)
            if SignalRelay.jobControl.contains(delivery.signal) { stopForwarded.store(forward, ordering: .relaxed) }
            if forward { kill(current.childPID, delivery.signal) }
        } resumed: { _ in
            // A stop forwarded to the child is ours to undo; one the child received itself is its shell's.
            if stopForwarded.load(ordering: .relaxed), let current = forwarding.withLock({ $0.forwarder }) {
                kill(current.childPID, SIGCONT)
            }
        }
        let started: ChildProcess
        do {
            started = try ChildProcess.spawn(arguments, preload: preload)
        } catch {
            if case .success(let witness) = witness { witness.stop() }
            throw error
        }
        let signals = SignalForwarder(childPID: started.pid, witness: try? witness.get())
        let early = forwarding.withLock { state in
            state.forwarder = signals
            defer { state.early = [] }
            return state.early
        }
        for delivery in early { kill(started.pid, delivery.signal) }
        defer { signals.stop() }
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

    /// The lock book library (``LockBook``) installed with this executable: beside it, or in `../lib` of its
    /// directory.
    ///
    /// - Throws: `.spawnFailed` naming the places looked in when it is in neither.
    package static func lockBookLibrary() throws(SidecarError) -> String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let length = readlink("/proc/self/exe", &buffer, Int(PATH_MAX))
        let executable =
            length > 0 ? String(decoding: buffer.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self) : ""
        let directory = executable.split(separator: "/", omittingEmptySubsequences: false).dropLast()
            .joined(separator: "/")
        let places = [directory + "/" + LockBook.libraryName, directory + "/../lib/" + LockBook.libraryName]
        guard let found = places.first(where: { access($0, R_OK) == 0 }) else {
            throw SidecarError(
                .spawnFailed,
                "the lock book \(LockBook.libraryName) is not installed beside stallwatch: looked for "
                    + places.joined(separator: " and "),
                context: ["library": LockBook.libraryName])
        }
        // LD_PRELOAD separates libraries by spaces and colons.
        guard !found.contains(" "), !found.contains(":") else {
            throw SidecarError(
                .spawnFailed, "the lock book's path \(found) holds a space or a colon, which LD_PRELOAD cannot carry",
                context: ["library": found])
        }
        return found
    }
}
