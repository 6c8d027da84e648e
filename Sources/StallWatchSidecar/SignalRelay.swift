// SignalRelay: the sidecar tools' signals on an ordinary thread — forwarded, obeyed between captures, or acted on.
import CStallWatchSignal
import StallWatch

#if canImport(Glibc)
    import Glibc
#endif

/// Relays signals to a thread of its own: the C handler (`sw_relay.h`) writes one record per signal (the number
/// and, from `siginfo_t`, who sent it and how) to a pipe and does nothing else; the relay thread calls the handler
/// given to ``install(_:handler:resumed:)``.
///
/// Job-control stops (SIGTSTP, SIGTTIN, SIGTTOU) are obeyed only between captures: after the handler has
/// seen the signal, the relay thread waits for the capture under way to detach (``CaptureGate``) and then
/// stops the process with SIGSTOP; once continued it lets captures go on. A sidecar suspended by ^Z therefore
/// never leaves its target in tracing stop.
enum SignalRelay {
    /// One signal as it arrived, as the kernel described it to the handler.
    struct Delivery: Sendable, Equatable, CustomStringConvertible {
        let signal: Int32
        /// `si_code`: positive when the kernel sent it (a terminal's ^C, ^Z, ^\, a hangup, a timer), `SI_USER` (0)
        /// for `kill`, `SI_TKILL` for `tgkill`, `SI_QUEUE` for `sigqueue`.
        let code: Int32
        /// The sending process for a signal a process sent; 0 for the kernel's.
        let senderPID: Int32
        /// The sender's real user id (0 for the kernel's).
        let senderUID: UInt32
        /// When the handler ran, the signal witness (``SignalWitness``) had the same signal pending: it was sent to
        /// the witness too.
        let witnessHadItPending: Bool

        init(
            signal: Int32, code: Int32 = 0, senderPID: Int32 = 0, senderUID: UInt32 = 0,
            witnessHadItPending: Bool = false
        ) {
            self.signal = signal
            self.code = code
            self.senderPID = senderPID
            self.senderUID = senderUID
            self.witnessHadItPending = witnessHadItPending
        }

        /// Sent by the kernel, not by a process.
        var fromKernel: Bool { code > 0 }

        /// The same signal from the same sender, sent the same way.
        func sameSending(as other: Delivery) -> Bool {
            signal == other.signal && code == other.code && senderPID == other.senderPID
                && senderUID == other.senderUID
        }

        var description: String {
            fromKernel ? "signal \(signal) from the kernel" : "signal \(signal) from process \(senderPID)"
        }

        init(_ record: sw_relay_record) {
            self.init(
                signal: record.signo, code: record.code, senderPID: record.pid, senderUID: record.uid,
                witnessHadItPending: record.flags & UInt32(SW_RELAY_WITNESS_PENDING) != 0)
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
            while let delivery = read(readFD) {
                handler(delivery)
                if jobControl.contains(delivery.signal) {
                    CaptureGate.excludingCaptures { _ = kill(getpid(), SIGSTOP) }
                    resumed(delivery)
                }
            }
        }
    }

    /// The next record on the relay pipe; nil once the pipe is closed or broken.
    static func read(_ fd: Int32) -> Delivery? {
        var record = sw_relay_record()
        let size = MemoryLayout<sw_relay_record>.size
        var got = 0
        while got < size {
            let n = withUnsafeMutableBytes(of: &record) { Glibc.read(fd, $0.baseAddress! + got, size - got) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return nil }
            got += n
        }
        return Delivery(record)
    }
}
