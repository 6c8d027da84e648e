// The command `stallwatch run` starts: waited for and reaped however it dies, even while being traced.
import CStallWatchCore
import CStallWatchFixtures
import Foundation
import StallWatchTestSupport
import Testing

@testable import StallWatchSidecar

#if canImport(Glibc)
    import Glibc
#endif

@Suite(.offPool, .serialized) struct ChildProcessTests {
    /// What the spawning thread saw: the child's pid and its own tid, then the child's status.
    final class Waiter: @unchecked Sendable {
        // @unchecked Sendable: every field is read and written under `lock`.
        private let lock = NSLock()
        private var pidValue: Int32 = 0
        private var tidValue: Int32 = 0
        private var statusValue: Int32?
        let started = DispatchSemaphore(value: 0)
        let finished = DispatchSemaphore(value: 0)
        var pid: Int32 { lock.withLock { pidValue } }
        var tid: Int32 { lock.withLock { tidValue } }
        var status: Int32? { lock.withLock { statusValue } }
        func begin(pid: Int32, tid: Int32) {
            lock.withLock { (pidValue, tidValue) = (pid, tid) }
            started.signal()
        }
        func end(_ status: Int32) {
            lock.withLock { statusValue = status }
            finished.signal()
        }
    }

    /// The state letter of a thread of this process in /proc.
    static func state(ofThread tid: Int32) -> Character? {
        guard let text = try? String(contentsOfFile: "/proc/self/task/\(tid)/stat", encoding: .utf8),
            let end = text.lastIndex(of: ")")
        else { return nil }
        return text[end...].dropFirst(2).first
    }

    @Test(.timeLimit(.minutes(3)))
    func aChildKilledWhileAnotherThreadOfOursTracesItIsStillReaped() throws {
        // The waiter spawns and waits on one thread of its own (ChildProcess.wait is for the spawning thread).
        let waiter = Waiter()
        let thread = Thread {
            guard let child = try? ChildProcess.spawn(["/bin/sleep", "30"]) else { return waiter.begin(pid: 0, tid: 0) }
            waiter.begin(pid: child.pid, tid: sw_gettid())
            waiter.end(child.wait())
        }
        thread.start()
        #expect(waiter.started.wait(timeout: .now() + 10) == .success)
        let pid = waiter.pid
        try #require(pid > 0, "the child did not start")
        defer {
            kill(pid, SIGKILL)
            var status: Int32 = 0
            waitpid(pid, &status, WNOHANG)  // reaps it should the waiter have missed the exit
        }
        // Another thread traces the child, as a capture does, and lets go only once it is a zombie.
        #expect(sw_test_trace_until_exit(pid, 10_000) == 0, "PTRACE_SEIZE of the child failed")
        // The waiter is asleep in its wait before the child dies: the order in which the exit can be missed.
        let deadline = ContinuousClock.now + .seconds(10)
        while Self.state(ofThread: waiter.tid) != "S", ContinuousClock.now < deadline { usleep(1_000) }
        kill(pid, SIGKILL)
        #expect(waiter.finished.wait(timeout: .now() + 10) == .success, "the waiter missed the child's exit")
        #expect(waiter.status == 128 + SIGKILL)
    }
}
