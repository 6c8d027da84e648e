// SignalRelay: the sidecar tools' signals on an ordinary thread — forwarded, obeyed between captures, or acted on.
import CStallWatchSignal
import StallWatch

#if canImport(Glibc)
    import Glibc
#endif

/// Relays signals to a thread of its own: the C handler (`sw_relay.h`) writes one byte per signal to a pipe
/// and does nothing else; the relay thread calls the handler given to ``install(_:handler:)``.
///
/// Job-control stops (SIGTSTP, SIGTTIN, SIGTTOU) are obeyed only between captures: after the handler has
/// seen the signal, the relay thread waits for the capture under way to detach (``CaptureGate``) and then
/// stops the process with SIGSTOP; once continued it lets captures go on. A sidecar suspended by ^Z therefore
/// never leaves its target in tracing stop.
enum SignalRelay {
    /// One signal as it arrived.
    struct Delivery: Sendable, Equatable {
        let signal: Int32
        /// Sent by the kernel (the terminal's ^C, ^Z, ^\ …), not by a process: the terminal sent it to the
        /// whole foreground process group, so a child in that group has it already.
        let fromKernel: Bool

        init(signal: Int32, fromKernel: Bool) {
            self.signal = signal
            self.fromKernel = fromKernel
        }
    }

    /// Signals that end a sidecar tool: `watch` and `daemon` stop on them.
    static let termination: [Int32] = [SIGINT, SIGTERM, SIGHUP]
    /// Every catchable signal `run` forwards to its child rather than die of (or ignore): the terminating
    /// ones, the user and timer signals, and the rest whose default would kill `run` and orphan the child.
    /// Not SIGPIPE (a closed output is `run`'s own business), SIGCHLD, or those the Swift runtime owns.
    static let forwardable: [Int32] = [
        SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGALRM, SIGWINCH, SIGURG, SIGPWR, SIGVTALRM, SIGPROF,
        SIGXCPU, SIGXFSZ, SIGSTKFLT, SIGIO, SIGCONT,
    ]
    /// Job-control stops, obeyed between captures.
    static let jobControl: [Int32] = [SIGTSTP, SIGTTIN, SIGTTOU]

    nonisolated(unsafe) private static var installed = false

    /// Installs the relay for `signals` plus the job-control stops, once per process (later calls are
    /// ignored); `handler` runs on the relay thread for each delivery, job-control stops included (before the
    /// process stops, so `run` can pass a stop on to its child), and `resumed` after such a stop.
    static func install(
        _ signals: [Int32], handler: @escaping @Sendable (Delivery) -> Void,
        resumed: @escaping @Sendable (Delivery) -> Void = { _ in }
    ) {
        guard !installed else { return }
        installed = true
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { return }
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        _ = fcntl(fds[1], F_SETFL, O_NONBLOCK)
        let all = Array(Set(signals + jobControl)).sorted()
        _ = all.withUnsafeBufferPointer { sw_relay_install(fds[1], $0.baseAddress, $0.count) }
        let readFD = fds[0]
        // Never joined: it lives as long as the process (dropping the handle detaches it).
        _ = try? NamedThread(name: "stallwatch-sigs") {
            var byte: UInt8 = 0
            while true {
                let n = read(readFD, &byte, 1)
                if n < 0 && errno == EINTR { continue }
                guard n == 1 else { return }
                let delivery = Delivery(
                    signal: Int32(byte & 0x7f), fromKernel: byte & UInt8(SW_RELAY_FROM_KERNEL) != 0)
                handler(delivery)
                if jobControl.contains(delivery.signal) {
                    CaptureGate.excludingCaptures { _ = kill(getpid(), SIGSTOP) }
                    resumed(delivery)
                }
            }
        }
    }
}
