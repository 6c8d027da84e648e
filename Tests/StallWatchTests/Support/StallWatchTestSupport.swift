// Helpers shared by the StallWatch tests.
import CStallWatchCore
import Dispatch
import Foundation
import StallWatchTestSupport
import Testing

@testable import StallWatch

#if canImport(Glibc)
    import Glibc
#endif

enum StallWatchTestSupport {
    static func currentThreadID() -> Int32 { sw_gettid() }

    /// A holder thread does `take`, then a waiter thread blocks in `block` on the lock word at `lockWord`: returns
    /// what ``RecordedHolder`` finds from the waiter's futex wait, with both threads' ids, once the holder did
    /// `release` and the waiter got through `block` and did `after`.
    static func findWhileHeld(
        lockWord: UInt64, take: @escaping @Sendable () -> Void, release: @escaping @Sendable () -> Void,
        block: @escaping @Sendable () -> Void, after: @escaping @Sendable () -> Void = {},
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> (found: RecordedHolder.Finding?, holder: Int32, waiter: Int32) {
        let holder = HolderTID()
        let waiter = HolderTID()
        let taken = DispatchSemaphore(value: 0)
        let released = DispatchSemaphore(value: 0)
        let done = DispatchSemaphore(value: 0)
        Thread {
            holder.set(currentThreadID())
            take()
            taken.signal()
            released.wait()
            release()
        }.start()
        taken.wait()
        Thread {
            waiter.set(currentThreadID())
            block()
            after()
            done.signal()
        }.start()
        defer {
            released.signal()
            #expect(done.wait(timeout: .now() + 10) == .success, sourceLocation: sourceLocation)
        }
        let pid = getpid()
        func waitOf() -> ThreadWait? {
            guard waiter.value != 0, let wait = ProcDirectory(processID: pid, threadID: waiter.value).syscall(),
                wait.number == 202
            else { return nil }
            return wait
        }
        #expect(pollUntil { waitOf() != nil }, sourceLocation: sourceLocation)
        let wait = try #require(waitOf(), sourceLocation: sourceLocation)
        #expect(wait.arguments[0] == lockWord, sourceLocation: sourceLocation)
        let found = RecordedHolder.find(
            pid: pid, waiter: waiter.value, wait: wait, threads: Set(ThreadProbe.threadIDs(pid: pid)))
        return (found, holder.value, waiter.value)
    }
}
