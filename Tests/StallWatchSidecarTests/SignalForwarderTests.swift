// The rule `run` forwards signals by, against a real witness process forked from this test process.
import CStallWatchSignal
import Foundation
import StallWatch
import StallWatchTestSupport
import Testing

@testable import StallWatchSidecar

#if canImport(Glibc)
    import Glibc
#endif

/// A witness of SIGUSR2 and SIGWINCH in this test process's group and cgroup; the "child" is this process itself,
/// which shares both with the witness (as `run`'s child does).
@Suite(.offPool, .serialized) struct SignalForwarderTests {
    /// A signal as `run` would receive it from this process with `kill`.
    static func fromUs(_ signal: Int32) -> SignalRelay.Delivery {
        SignalRelay.Delivery(signal: signal, code: 0, senderPID: getpid(), senderUID: getuid())
    }

    static func forwarder() throws -> (SignalForwarder, SignalWitness) {
        let witness = try SignalWitness.start(signals: [SIGUSR2, SIGWINCH])
        return (SignalForwarder(childPID: getpid(), witness: witness), witness)
    }

    @Test(.timeLimit(.minutes(3)))
    func aSignalTheWitnessReportedFromTheSameSenderReachedTheChild() throws {
        let (forwarder, witness) = try Self.forwarder()
        defer { witness.stop() }
        kill(witness.pid, SIGUSR2)
        #expect(forwarder.childHasAlready(Self.fromUs(SIGUSR2)))
        // One report, one match: the same signal again, to `run` alone, is forwarded.
        #expect(!forwarder.childHasAlready(Self.fromUs(SIGUSR2)))
    }

    @Test(.timeLimit(.minutes(3)))
    func aSignalOnlyRunReceivedIsForwardedAfterTheGraceAndNotBefore() throws {
        let (forwarder, witness) = try Self.forwarder()
        defer { witness.stop() }
        let start = ContinuousClock.now
        #expect(!forwarder.childHasAlready(Self.fromUs(SIGWINCH)))
        let waited = ContinuousClock.now - start
        #expect(waited >= .nanoseconds(Int64(SignalForwarder.graceNanos)), "decided after \(waited)")
    }

    @Test(.timeLimit(.minutes(3)))
    func theSameSignalFromAnotherSenderIsNotTakenForIt() throws {
        let (forwarder, witness) = try Self.forwarder()
        defer { witness.stop() }
        let other = try Spawned("/bin/kill", ["-USR2", "\(witness.pid)"])
        #expect(other.wait() == 0)
        #expect(!forwarder.childHasAlready(Self.fromUs(SIGUSR2)))
    }

    /// systemd signals the main process first and the rest of the cgroup after: the witness's copy may come a moment
    /// after `run`'s. Judged by when it was really sent (this test's own clock): within the grace it counts.
    @Test(.timeLimit(.minutes(3)))
    func aCopyTheWitnessGetsWithinTheGraceCounts() throws {
        let (forwarder, witness) = try Self.forwarder()
        defer { witness.stop() }
        let start = ContinuousClock.now
        let sentAfter = Locked<Duration?>(nil)
        let sender = Thread {
            usleep(20_000)
            kill(witness.pid, SIGUSR2)
            sentAfter.withLock { $0 = ContinuousClock.now - start }
        }
        sender.start()
        let reached = forwarder.childHasAlready(Self.fromUs(SIGUSR2))
        while sentAfter.withLock({ $0 }) == nil { usleep(1_000) }
        let after = try #require(sentAfter.withLock { $0 })
        let grace = Duration.nanoseconds(Int64(SignalForwarder.graceNanos))
        // A copy sent well within the grace must count; one the scheduler held back past it must not.
        if after < grace - .milliseconds(10) { #expect(reached, "sent \(after) after the question") }
        if after > grace + .milliseconds(10) { #expect(!reached, "sent \(after) after the question") }
    }

    /// What `run`'s handler reads: the witness's pending mask. A stopped witness cannot take its signal, so it stays
    /// pending until the witness runs again (and then is reported).
    @Test(.timeLimit(.minutes(3)))
    func theHandlerSeesASignalTheWitnessHasNotTakenYet() throws {
        let (forwarder, witness) = try Self.forwarder()
        defer { witness.stop() }
        kill(witness.pid, SIGSTOP)
        #expect(sw_signal_pending(witness.pid, SIGUSR2) == 0)
        kill(witness.pid, SIGUSR2)
        #expect(sw_signal_pending(witness.pid, SIGUSR2) != 0)
        #expect(sw_signal_pending(witness.pid, SIGWINCH) == 0)
        kill(witness.pid, SIGCONT)
        // Taken and reported once it runs: the report matches a signal of the same sending.
        #expect(forwarder.childHasAlready(Self.fromUs(SIGUSR2)))
        #expect(sw_signal_pending(witness.pid, SIGUSR2) == 0)
    }
}
