// ChildProcess: the command `stallwatch run` starts, waits for and passes signals to.
import CStallWatchCore
import StallWatch

#if canImport(Glibc)
    import Glibc
#endif

/// A child started with `posix_spawnp`, with a clean signal mask and default dispositions, so it behaves as if
/// started by a shell; being our child also lets us ptrace it under Yama's `ptrace_scope = 1`.
final class ChildProcess: Sendable {
    let pid: Int32
    let arguments: [String]

    private init(pid: Int32, arguments: [String]) {
        self.pid = pid
        self.arguments = arguments
    }

    /// Starts `arguments[0]` (searched in PATH) with `arguments`, in this process's environment with `preload`
    /// put before any `LD_PRELOAD` it has.
    ///
    /// - Throws: `.spawnFailed` naming the command and the reason (not found, not executable …).
    static func spawn(_ arguments: [String], preload: [String] = []) throws(SidecarError) -> ChildProcess {
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
        var environment: [UnsafeMutablePointer<CChar>?] = []
        if !preload.isEmpty {
            var inherited: [String] = []
            var entry = environ
            while let pointer = entry.pointee {
                inherited.append(String(cString: pointer))
                entry += 1
            }
            let prefix = "LD_PRELOAD="
            let earlier = inherited.first { $0.hasPrefix(prefix) }.map { String($0.dropFirst(prefix.count)) }
            let value = (preload + (earlier.map { [$0] } ?? [])).filter { !$0.isEmpty }.joined(separator: ":")
            environment = (inherited.filter { !$0.hasPrefix(prefix) } + [prefix + value]).map { strdup($0) } + [nil]
        }
        defer { for pointer in environment { free(pointer) } }
        var pid: pid_t = 0
        let result =
            environment.isEmpty
            ? posix_spawnp(&pid, command, nil, &attributes, &argv, environ)
            : posix_spawnp(&pid, command, nil, &attributes, &argv, &environment)
        guard result == 0 else {
            throw SidecarError(
                .spawnFailed, "cannot run \(command): \(String(cString: strerror(result)))",
                context: ["command": command, "errno": String(result)])
        }
        return ChildProcess(pid: pid, arguments: arguments)
    }

    /// Waits for the child to exit (call on the thread that spawned it).
    ///
    /// `__WNOTHREAD` keeps this wait to our own children, so it never reaps what another thread of this process
    /// waits for. A blocking wait of that kind can miss the exit for good, though: while a capture thread of
    /// ours traces the child's main thread, the kernel tells the exit to that tracer, and wakes a `__WNOTHREAD`
    /// waiter only when it is the child's current parent; when the tracer then exits (detaching the zombie) it
    /// tells nobody, since its thread group is the real parent's. So the exit is awaited on a pidfd, which the
    /// kernel marks readable once the process is gone whoever traces it, and reaped with `WNOHANG`. Stop reports
    /// are skipped.
    ///
    /// - Returns: Its exit status, or 128 + the signal that killed it (as shells report it).
    func wait() -> Int32 {
        let exited = sw_pidfd_open(pid)
        defer { if exited >= 0 { close(exited) } }
        var status: Int32 = 0
        var readable = false
        while true {
            let result = waitpid(pid, &status, WNOHANG | __WNOTHREAD)
            if result == -1 {
                if errno == EINTR { continue }
                return 127
            }
            if result == pid {
                let signal = status & 0x7f
                if signal == 0 { return (status >> 8) & 0xff }  // exited
                if signal != 0x7f { return 128 + signal }  // killed by a signal
                continue  // a stop report: look again at once
            }
            if exited < 0 || readable {
                // No pidfd (a kernel before 5.3, a seccomp filter), or gone but not yet reapable (a tracer of
                // another process holds the zombie): look again soon.
                usleep(exited < 0 ? 50_000 : 10_000)
            }
            // The second's bound only guards against a wake-up this reasoning missed.
            readable = exited >= 0 && sw_wait_readable(exited, -1, 1_000_000_000) > 0
        }
    }

    /// Sends `signal` to the child (SIGINT/SIGTERM forwarding).
    func send(_ signal: Int32) { kill(pid, signal) }
}

/// Turns SIGINT, SIGTERM and SIGHUP into a callback on an ordinary thread (``SignalRelay``), and makes
/// job-control stops wait for the capture under way.
package enum TerminationSignals {
    /// Installs the relay and calls `handler` with each terminating signal received.
    package static func install(_ handler: @escaping @Sendable (Int32) -> Void) {
        SignalRelay.install(SignalRelay.termination) { delivery in
            if SignalRelay.termination.contains(delivery.signal) { handler(delivery.signal) }
        }
    }
}
