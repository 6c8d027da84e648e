// The cause classifier on hand-made evidence, and lock owners read from real glibc mutexes.
import Dispatch
import Foundation
import StallWatchTestSupport
import Testing

@testable import StallWatch

@Suite(.offPool) struct CauseClassifierTests {
    typealias O = CauseClassifier.Observation
    let ms: UInt64 = 1_000_000

    func evidence(_ o: [O], cpuMs: UInt64?, threads: [StallReport.ThreadSnapshot] = []) -> CauseClassifier.Evidence {
        .init(
            loopThreadID: 100, observations: o, wallNanos: 1000 * ms, loopCPUNanos: cpuMs.map { $0 * ms },
            threads: threads)
    }

    @Test func runningWithCPUTimeGrowingIsCPU() {
        let cause = CauseClassifier.classify(
            evidence(Array(repeating: O(state: "R", syscall: nil, wchan: nil), count: 10), cpuMs: 980))
        #expect(cause.kind == .cpu)
        #expect(cause.evidence.contains { $0.contains("980 ms of CPU in 1000 ms (98%)") })
    }

    /// Caught running in user space by two of three samples and in a mutex's futex wait by the third, a thread that
    /// ran 1 % of the span was waiting for the lock: the running samples were instants between its waits (seen
    /// beside other work: a loop contending for a lock a writer holds 100 ms at a time, woken at each release).
    @Test func runningSamplesOfAThreadThatBarelyRanAreInstantsBetweenItsLockWaits() {
        var o = Array(repeating: O(state: "R", syscall: nil, wchan: nil, symbols: ["__vdso_clock_gettime"]), count: 2)
        o.insert(O(state: "S", syscall: 202, wchan: "futex_wait_queue", symbols: ["__GI___lll_lock_wait"]), at: 1)
        let cause = CauseClassifier.classify(evidence(o, cpuMs: 10))
        #expect(cause.kind == .lock, "\(cause.evidence)")
        #expect(cause.evidence.contains { $0.contains("2 of 3 samples caught the thread running") })
        // With a tenth of the span or more in CPU, the running samples are the stall's: `cpu`.
        #expect(CauseClassifier.classify(evidence(o, cpuMs: 150)).kind == .cpu)
    }

    @Test func nanosleepIsSleep() {
        let cause = CauseClassifier.classify(
            evidence(Array(repeating: O(state: "S", syscall: 230, wchan: "hrtimer_nanosleep"), count: 10), cpuMs: 0))
        #expect(cause.kind == .sleep)
        #expect(cause.evidence.contains { $0.contains("clock_nanosleep") })
    }

    @Test func fsyncOrDiskSleepIsIO() {
        var o = Array(repeating: O(state: "D", syscall: 74, wchan: "jbd2_log_wait_commit"), count: 6)
        o += Array(repeating: O(state: "R", syscall: 1, wchan: nil), count: 4)
        let cause = CauseClassifier.classify(evidence(o, cpuMs: 300))
        #expect(cause.kind == .io)
        #expect(cause.evidence.contains { $0.contains("state D") })
    }

    @Test func runningInsideAWriteWrapperIsIO() {
        let o = [
            O(state: "R", syscall: nil, wchan: nil, symbols: ["__write", "Stalls.stallOnDiskIO"]),
            O(state: "R", syscall: nil, wchan: nil, symbols: ["fsync", "Stalls.stallOnDiskIO"]),
            O(state: "R", syscall: nil, wchan: nil, symbols: ["__GI___libc_write", "Stalls.stallOnDiskIO"]),
            O(state: "R", syscall: nil, wchan: nil, symbols: ["Stalls.stallOnDiskIO"]),
        ]
        let cause = CauseClassifier.classify(evidence(o, cpuMs: 700))
        #expect(cause.kind == .io)
    }

    @Test func capturesThatTimedOutInsideAKernelCallAreIONamingTheCallNeverCPU() {
        // State R and /proc/…/syscall "running" throughout; only the kernel stack named the call.
        let o = Array(repeating: O(state: "R", syscall: 1, wchan: nil, captureTimedOut: true), count: 5)
        let cause = CauseClassifier.classify(evidence(o, cpuMs: 900))
        #expect(cause.kind == .io)
        #expect(cause.evidence.contains { $0.contains("in I/O (write)") })
        #expect(cause.evidence.contains { $0.contains("did not stop for a capture in time") })
        let unnamed = Array(repeating: O(state: "R", syscall: nil, wchan: nil, captureTimedOut: true), count: 5)
        #expect(CauseClassifier.classify(evidence(unnamed, cpuMs: 900)).kind == .io)
    }

    @Test func capturesThatTimedOutForAThreadWaitingForACPUAreStarvationNotIO() {
        // No call known, and the thread spent the stall in the run queue: it could not reach the stop.
        let o = Array(repeating: O(state: "R", syscall: nil, wchan: nil, captureTimedOut: true), count: 5)
        var starved = evidence(o, cpuMs: 20)
        starved.loopRunQueueWaitNanos = 950 * ms
        #expect(CauseClassifier.classify(starved).kind == .starved)
        // A call named by the kernel stack is io while the thread had its CPU; starved when it mostly waited
        // for one (the run queue covers the span, a sample one moment).
        let named = Array(repeating: O(state: "R", syscall: 1, wchan: nil, captureTimedOut: true), count: 5)
        var inWrite = evidence(named, cpuMs: 20)
        inWrite.loopRunQueueWaitNanos = 100 * ms
        #expect(CauseClassifier.classify(inWrite).kind == .io)
        inWrite.loopRunQueueWaitNanos = 950 * ms
        #expect(CauseClassifier.classify(inWrite).kind == .starved)
    }

    /// Runnable, in no call by /proc, its stack in a futex wait's wrapper, and the capture's stop 186 ms in coming:
    /// the wait had ended and the thread waited for a CPU — the machine's doing, not a lock's. The same stack read
    /// blocked (`S` in the futex call), or stopped at once, is the lock wait.
    @Test func aThreadWokenFromAWaitThatTookLongToStopIsStarvedNotALockWait() {
        var woken = O(
            state: "R", syscall: nil, wchan: nil, symbols: ["__futex_abstimed_wait_common", "__new_sem_wait_slow"])
        woken.stopWaitNanos = 186 * ms
        let starved = CauseClassifier.classify(evidence([woken], cpuMs: nil))
        #expect(starved.kind == .starved, "\(starved.evidence)")
        #expect(starved.evidence.contains { $0.contains("woken from its wait (futex)") && $0.contains("186 ms") })
        var stoppedAtOnce = woken
        stoppedAtOnce.stopWaitNanos = 40_000
        #expect(CauseClassifier.classify(evidence([stoppedAtOnce], cpuMs: nil)).kind == .lock)
        var blocked = woken
        blocked.state = "S"
        blocked.syscall = 202
        #expect(CauseClassifier.classify(evidence([blocked], cpuMs: nil)).kind == .lock)
        // One woken sample among blocked ones: the lock wait stands.
        #expect(CauseClassifier.classify(evidence([woken, blocked, blocked], cpuMs: nil)).kind == .lock)
    }

    @Test func aKernelStackNamesTheSystemCallItIsInside() {
        let write = [
            "generic_perform_write", "shmem_file_write_iter", "vfs_write", "ksys_write", "do_syscall_64",
            "entry_SYSCALL_64_after_hwframe",
        ]
        #expect(KernelStack.syscall(in: write) == 1)
        let fsync = ["jbd2_log_wait_commit", "ext4_sync_file", "do_fsync", "__x64_sys_fsync", "do_syscall_64"]
        #expect(KernelStack.syscall(in: fsync) == 74)
        #expect(KernelStack.syscall(in: ["irqentry_exit_to_user_mode", "asm_exc_page_fault"]) == nil)
        #expect(KernelStack.syscall(in: ["vfs_write", "do_syscall_64"]) == nil)
    }

    @Test func aKernelStackEndingInAnInterruptsExitIsAPreemptedThread() {
        #expect(KernelStack.isPreempted(["irqentry_exit_to_user_mode", "asm_sysvec_apic_timer_interrupt"]))
        #expect(KernelStack.isPreempted(["irqentry_exit", "asm_sysvec_reschedule_ipi", "generic_perform_write"]))
        #expect(
            !KernelStack.isPreempted(["do_nanosleep", "hrtimer_nanosleep", "__x64_sys_nanosleep", "do_syscall_64"]))
        #expect(!KernelStack.isPreempted(["futex_wait_queue", "futex_wait", "do_futex", "do_syscall_64"]))
        #expect(!KernelStack.isPreempted([]))
    }

    @Test(arguments: [
        ("__write", 1), ("__GI___libc_write", 1), ("fsync", 74), ("ftruncate64", 77), ("__lll_lock_wait", 202),
        ("clock_nanosleep@GLIBC_2.2.5", 230), ("__nanosleep", 35), ("__pthread_mutex_lock@GLIBC_2.2.5", -1),
        ("Stalls.stallOnCPU", -1),
    ])
    func libcWrapperSymbolsNameTheirSystemCall(symbol: String, number: Int) {
        #expect(SyscallTable.number(forWrapperSymbol: symbol) == (number < 0 ? nil : number))
    }

    @Test func futexWithAReadableOwnerIsLockNamingTheOwner() {
        let o = Array(repeating: O(state: "S", syscall: 202, wchan: "futex_wait_queue", lockOwner: 200), count: 10)
        let threads = [StallReport.ThreadSnapshot(threadId: 200, name: "db-writer", state: "S", syscall: "nanosleep")]
        let cause = CauseClassifier.classify(evidence(o, cpuMs: 1, threads: threads))
        #expect(cause.kind == .lock)
        #expect(cause.blockingThreadId == 200)
        #expect(cause.evidence.contains { $0.contains("held by thread 200 (db-writer)") })
    }

    /// Contention on a busy machine: the loop is woken at each unlock, waits for a CPU and finds the lock taken
    /// again, so most samples catch it runnable in user space inside the mutex's lock, between two futex waits.
    /// With 2% of the stall in CPU those samples are the lock wait, named with its holder; with 95% (a lock spun on)
    /// they are the loop's own work.
    @Test func samplesInsideAMutexLockWithLittleCPUAreTheLockWait() {
        let between = O(state: "R", syscall: nil, wchan: nil, symbols: ["___pthread_mutex_lock", "update", "main"])
        let waiting = O(
            state: "S", syscall: 202, wchan: "futex_wait_queue", symbols: ["__lll_lock_wait"], lockOwner: 200)
        let threads = [StallReport.ThreadSnapshot(threadId: 200, name: "db-writer", state: "S", syscall: "nanosleep")]
        let contended = CauseClassifier.classify(
            evidence([between, between, between, waiting], cpuMs: 20, threads: threads))
        #expect(contended.kind == .lock, "\(contended.evidence)")
        #expect(contended.blockingThreadId == 200)
        let spun = CauseClassifier.classify(
            evidence([between, between, between, waiting], cpuMs: 950, threads: threads))
        #expect(spun.kind == .cpu, "\(spun.evidence)")
    }

    @Test func ownerWaitingBackOnTheLoopIsADeadlockNamingBothThreads() {
        let o = Array(repeating: O(state: "S", syscall: 202, wchan: "futex_wait_queue", lockOwner: 200), count: 10)
        let threads = [
            StallReport.ThreadSnapshot(
                threadId: 100, name: "main", state: "S", syscall: "futex", waitingForThreadId: 200),
            StallReport.ThreadSnapshot(
                threadId: 200, name: "worker", state: "S", syscall: "futex", waitingForThreadId: 100),
        ]
        let cause = CauseClassifier.classify(evidence(o, cpuMs: 0, threads: threads))
        #expect(cause.kind == .deadlock)
        #expect(cause.deadlockedThreadIds == [100, 200])
        #expect(cause.blockingThreadId == 200)
    }

    @Test func aLockHeldByTheLoopItselfIsASelfDeadlock() {
        let o = Array(repeating: O(state: "S", syscall: 202, wchan: nil, lockOwner: 100), count: 4)
        let cause = CauseClassifier.classify(evidence(o, cpuMs: 0))
        #expect(cause.kind == .deadlock)
        #expect(cause.deadlockedThreadIds == [100])
        #expect(cause.evidence.contains { $0.contains("re-entered") })
    }

    @Test func longerWaitChainsBackToTheLoopAreDeadlocksToo() {
        let o = Array(repeating: O(state: "S", syscall: 202, wchan: nil, lockOwner: 200), count: 3)
        let threads = [
            StallReport.ThreadSnapshot(threadId: 200, name: "a", state: "S", waitingForThreadId: 300),
            StallReport.ThreadSnapshot(threadId: 300, name: "b", state: "S", waitingForThreadId: 100),
        ]
        #expect(
            CauseClassifier.classify(evidence(o, cpuMs: 0, threads: threads)).deadlockedThreadIds == [100, 200, 300])
    }

    @Test func noObservationsAndLittleCPUIsUnknown() {
        #expect(CauseClassifier.classify(evidence([], cpuMs: 10)).kind == .unknown)
        #expect(CauseClassifier.classify(evidence([], cpuMs: 900)).kind == .cpu)
    }

    @Test func highCPUShareWinsOverSparseUnclassifiedSamples() {
        let o = [O(state: "S", syscall: 9, wchan: nil), O(state: "R", syscall: nil, wchan: nil)]
        #expect(CauseClassifier.classify(evidence(o, cpuMs: 900)).kind == .cpu)
    }
}

@Suite(.offPool) struct LockOwnerTests {
    @Test(.timeLimit(.minutes(3)))
    func ownerOfAHeldGlibcMutexIsReadFromItsOwnerField() throws {
        let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
        pthread_mutex_init(mutex, nil)
        defer { mutex.deallocate() }
        let address = UInt64(UInt(bitPattern: mutex))
        let locked = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let unlocked = DispatchSemaphore(value: 0)
        let holder = HolderTID()
        let raw = UInt(bitPattern: mutex)
        let thread = Thread {
            let mutex = UnsafeMutablePointer<pthread_mutex_t>(bitPattern: raw)!
            holder.set(StallWatchTestSupport.currentThreadID())
            pthread_mutex_lock(mutex)
            locked.signal()
            release.wait()
            pthread_mutex_unlock(mutex)
            unlocked.signal()
        }
        thread.start()
        locked.wait()
        let threads = Set(ThreadProbe.threadIDs(pid: getpid()))
        let owner = LockOwner.owner(pid: getpid(), futexAddress: address, threads: threads)
        release.signal()
        #expect(owner?.threadID == holder.value)
        #expect(owner?.source == .glibcMutexOwner)
        // Unlocked: no owner.
        unlocked.wait()
        #expect(LockOwner.owner(pid: getpid(), futexAddress: address, threads: threads) == nil)
        // An unmapped address: nil, not a crash.
        #expect(LockOwner.owner(pid: getpid(), futexAddress: 0x10, threads: threads) == nil)
    }

    /// A reader and a writer blocked on a glibc read-write lock that a third thread holds for writing: each one's
    /// futex wait names the writer, read from the lock's `__cur_writer`; once the writer lets go, none.
    @Test(.timeLimit(.minutes(3)))
    func theWriterHoldingAReadWriteLockIsNamedForItsBlockedReadersAndWriters() throws {
        let rwlock = UnsafeMutablePointer<pthread_rwlock_t>.allocate(capacity: 1)
        pthread_rwlock_init(rwlock, nil)
        defer { rwlock.deallocate() }
        let raw = UInt(bitPattern: rwlock)
        let (locked, release, done) = (DispatchSemaphore(value: 0), DispatchSemaphore(value: 0), DispatchGroup())
        let (writer, reader, secondWriter) = (HolderTID(), HolderTID(), HolderTID())
        func start(_ tid: HolderTID, _ body: @escaping @Sendable (UnsafeMutablePointer<pthread_rwlock_t>) -> Void) {
            done.enter()
            Thread {
                tid.set(StallWatchTestSupport.currentThreadID())
                body(UnsafeMutablePointer<pthread_rwlock_t>(bitPattern: raw)!)
                done.leave()
            }.start()
        }
        start(writer) { lock in
            pthread_rwlock_wrlock(lock)
            locked.signal()
            release.wait()
            pthread_rwlock_unlock(lock)
        }
        locked.wait()
        start(reader) { lock in
            pthread_rwlock_rdlock(lock)
            pthread_rwlock_unlock(lock)
        }
        start(secondWriter) { lock in
            pthread_rwlock_wrlock(lock)
            pthread_rwlock_unlock(lock)
        }
        let pid = getpid()
        func waitOf(_ tid: HolderTID) -> ThreadWait? {
            guard tid.value != 0, let wait = ProcDirectory(processID: pid, threadID: tid.value).syscall(),
                wait.number == 202
            else { return nil }
            return wait
        }
        #expect(pollUntil { waitOf(reader) != nil && waitOf(secondWriter) != nil })
        let threads = Set(ThreadProbe.threadIDs(pid: pid))
        let readerWait = try #require(waitOf(reader))
        let writerWait = try #require(waitOf(secondWriter))
        // The reader waits on the phase word (+8 in the lock), the writer on the writers' word (+12).
        #expect(readerWait.arguments[0] == UInt64(raw) + 8 && writerWait.arguments[0] == UInt64(raw) + 12)
        let readerOwner = LockOwner.owner(pid: pid, wait: readerWait, threads: threads)
        let writerOwner = LockOwner.owner(pid: pid, wait: writerWait, threads: threads)
        #expect(readerOwner?.threadID == writer.value && readerOwner?.source == .glibcRwlockWriter)
        #expect(writerOwner?.threadID == writer.value && writerOwner?.source == .glibcRwlockWriter)
        release.signal()
        #expect(done.wait(timeout: .now() + 10) == .success)
        // Free: the same words name nobody.
        #expect(LockOwner.owner(pid: pid, wait: readerWait, threads: threads) == nil)
        #expect(LockOwner.owner(pid: pid, wait: writerWait, threads: threads) == nil)
    }
}

final class HolderTID: @unchecked Sendable {
    private let lock = NSLock()
    private var tid: Int32 = 0
    func set(_ v: Int32) { lock.lock(); tid = v; lock.unlock() }
    var value: Int32 { lock.lock(); defer { lock.unlock() }; return tid }
}
