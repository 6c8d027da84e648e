// ChildProcess: the command `stallwatch run` starts, waits for and passes signals to.
import StallWatch

#if canImport(Glibc)
    import Glibc
#endif

/// A child started with `posix_spawnp`, with a clean signal mask and default dispositions, so it behaves as if
/// started by a shell; being our child also lets us ptrace it under Yama's `ptrace_scope = 1`.
public final class ChildProcess: Sendable {
    public let pid: Int32
    public let arguments: [String]

    private init(pid: Int32, arguments: [String]) {
        self.pid = pid
        self.arguments = arguments
    }

    /// Starts `arguments[0]` (searched in PATH) with `arguments`.
    ///
    /// - Throws: `.spawnFailed` naming the command and the reason (not found, not executable …).
    public static func spawn(_ arguments: [String]) throws(SidecarError) -> ChildProcess {
        guard let command = arguments.first, !command.isEmpty else {
            throw SidecarError(.spawnFailed, "no command to run")
        }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigmask(&attributes, &empty)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGCHLD] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid: pid_t = 0
        let result = posix_spawnp(&pid, command, nil, &attributes, &argv, environ)
        guard result == 0 else {
            throw SidecarError(
                .spawnFailed, "cannot run \(command): \(String(cString: strerror(result)))",
                context: ["command": command, "errno": String(result)])
        }
        return ChildProcess(pid: pid, arguments: arguments)
    }

    /// Waits for the child to exit (call on the thread that spawned it).
    ///
    /// `__WNOTHREAD` keeps this wait to our own children: the ptrace helper thread's tracing stops of the same
    /// child are never consumed here, and stop reports are skipped anyway.
    ///
    /// - Returns: Its exit status, or 128 + the signal that killed it (as shells report it).
    public func wait() -> Int32 {
        var status: Int32 = 0
        while true {
            let result = waitpid(pid, &status, __WNOTHREAD)
            if result == -1 {
                if errno == EINTR { continue }
                return 127
            }
            let signal = status & 0x7f
            if signal == 0 { return (status >> 8) & 0xff }  // exited
            if signal != 0x7f { return 128 + signal }  // killed by a signal
        }
    }

    /// Sends `signal` to the child (SIGINT/SIGTERM forwarding).
    public func send(_ signal: Int32) { kill(pid, signal) }
}

/// Turns SIGINT, SIGTERM and SIGHUP into a callback on an ordinary thread (``SignalRelay``), and makes
/// job-control stops wait for the capture under way.
public enum TerminationSignals {
    /// Installs the relay and calls `handler` with each terminating signal received.
    public static func install(_ handler: @escaping @Sendable (Int32) -> Void) {
        SignalRelay.install(SignalRelay.termination) { delivery in
            if SignalRelay.termination.contains(delivery.signal) { handler(delivery.signal) }
        }
    }
}
