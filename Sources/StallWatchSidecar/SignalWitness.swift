// SignalWitness: a process beside `run`'s child that tells which signals were sent to the whole group or cgroup.
import CStallWatchSignal
import StallWatch
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A small process `stallwatch run` forks before it starts its command (`sw_witness.h`): it shares `run`'s process
/// group, session and cgroup, keeps every signal blocked and reports each forwardable one it receives, with the
/// sender the kernel names (`si_pid`, `si_code`). The kernel cannot tell a handler whether a signal was sent to
/// the process alone or to its whole process group (`kill -- -PGID`, a terminal's ^C) — both read `SI_USER` (or
/// `SI_KERNEL`) with the same sender — but a signal sent to the group or to every process of the cgroup (systemd's
/// `KillMode=control-group`) reaches the witness too, and one sent to `run` alone does not.
///
/// It lives until `run` stops it or exits (its lifeline pipe closes); it holds no descriptor of `run`'s, runs no
/// handler, and appears in `ps` as `stallwatch-sigw`.
final class SignalWitness: Sendable {
    /// The witness process.
    let pid: Int32
    private let reportFD: Int32
    private let lifelineFD: Int32
    private let stopped = Atomic<Bool>(false)

    private init(pid: Int32, reportFD: Int32, lifelineFD: Int32) {
        self.pid = pid
        self.reportFD = reportFD
        self.lifelineFD = lifelineFD
    }

    /// Forks a witness of `signals`.
    ///
    /// - Throws: `.systemCall` naming the call (`pipe2`, `fork`) that failed.
    static func start(signals: [Int32]) throws(SidecarError) -> SignalWitness {
        var pid: pid_t = 0
        var report: Int32 = -1
        var lifeline: Int32 = -1
        let result = signals.withUnsafeBufferPointer {
            sw_witness_start($0.baseAddress, $0.count, &pid, &report, &lifeline)
        }
        guard result == 0 else {
            throw SidecarError(
                .systemCall, "cannot start the signal witness: \(String(cString: strerror(-result)))",
                context: ["call": "fork", "errno": String(-result)])
        }
        // The relay handler looks at the witness's pending signals from now on.
        sw_relay_set_witness(pid)
        return SignalWitness(pid: pid, reportFD: report, lifelineFD: lifeline)
    }

    /// The signals the witness has reported since the last call, waiting until `deadline` (CLOCK_MONOTONIC
    /// nanoseconds) for the first when there is none yet; empty when none came by then.
    func reports(waitingUntil deadline: UInt64) -> [SignalRelay.Delivery] {
        var found: [SignalRelay.Delivery] = []
        while true {
            var record = sw_relay_record()
            let size = MemoryLayout<sw_relay_record>.size
            let n = withUnsafeMutableBytes(of: &record) { read(reportFD, $0.baseAddress, size) }
            if n == size {
                found.append(SignalRelay.Delivery(record))
                continue
            }
            if n < 0, errno == EINTR { continue }
            let now = sw_monotonic_ns()
            guard found.isEmpty, n < 0, errno == EAGAIN, now < deadline else { return found }
            var poll = pollfd(fd: reportFD, events: Int16(POLLIN), revents: 0)
            _ = Glibc.poll(&poll, 1, Int32(min((deadline - now) / 1_000_000 + 1, 1000)))
        }
    }

    /// Whether `signal` is pending at the witness: sent to it, not yet read by it (it will be reported).
    func hasPending(_ signal: Int32) -> Bool {
        sw_signal_pending(pid, signal) != 0
    }

    /// Ends the witness and reaps it; later calls do nothing.
    func stop() {
        guard !stopped.exchange(true, ordering: .acquiringAndReleasing) else { return }
        sw_relay_set_witness(0)
        sw_witness_stop(pid, lifelineFD)
        close(reportFD)
    }

    deinit { stop() }
}
