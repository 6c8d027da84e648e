import StallWatchTestSupport
// The sidecar on Debian's CPython running an asyncio service it knows nothing about.
import Testing

/// Stalls of a CPython asyncio service (Debian's /usr/bin/python3), one per mode of
/// `Fixtures/corpus/asyncio_service.py`. Slow: each case runs the service for about three seconds.
@Suite(.offPool, .serialized) struct CorpusPythonTests {
    static func python(_ mode: String, _ seconds: String = "1.0") -> [String] {
        ["/usr/bin/python3", CorpusHarness.fixture("asyncio_service.py"), mode, seconds]
    }

    static let cases: [CorpusCase] = [
        CorpusCase(name: "python idle loop", command: python("idle"), expect: .noReport),
        CorpusCase(name: "python loop parked on a condition", command: python("queue-idle"), expect: .noReport),
        CorpusCase(name: "python cpu", command: python("cpu"), expect: .stall(.cpu, frames: [])),
        CorpusCase(name: "python sleep", command: python("sleep"), expect: .stall(.sleep, frames: ["nanosleep"])),
        CorpusCase(
            name: "python sleep as a select on nothing", command: python("select-sleep"),
            expect: .stall(.sleep, frames: ["select"])),
        CorpusCase(
            name: "python nested select", command: python("nested-select"), expect: .stall(.io, frames: ["select"])),
        CorpusCase(
            name: "python nested epoll from the loop's own call site", command: python("nested-epoll"),
            expect: .stall(.io, frames: ["epoll_wait"])),
        CorpusCase(
            name: "python blocking read", command: python("blocking-read", "1.2"),
            expect: .stall(.io, frames: ["read"])),
        CorpusCase(
            name: "python ownerless lock", command: python("lock"),
            expect: .stall(.lock, frames: ["sem_", "futex", "lll_lock"]),
            evidenceContains: "not certain (the lock keeps no owner): thread"),
        // Captures time out (the thread does not leave the kernel): still io, the call named by the kernel stack,
        // and the pause figures say they leave those captures out.
        CorpusCase(
            name: "python one long write into tmpfs", command: python("big-write"), expect: .stall(.io, frames: []),
            // The call is named ("in I/O (write)") only when the kernel could unwind the thread's kernel stack
            // between two of its steps; a thread running in the kernel often cannot be, so "in I/O" is the bar.
            thresholdMs: 200, evidenceContains: "in I/O",
            captureErrorsContain: "with the thread working inside the kernel"),
        // Two ownerless locks taken crosswise: a likely deadlock of both threads, with no certain holder.
        CorpusCase(
            name: "python deadlock of two ownerless locks", command: python("deadlock", "1.5"),
            expect: .stall(.deadlock, frames: ["sem_", "futex", "lll_lock"], deadlock: true),
            evidenceContains: "likely a deadlock"),
        // A file lock another process holds: the kernel names that process.
        CorpusCase(
            name: "python flock held by another process", command: python("flock"),
            expect: .stall(.lock, frames: ["flock"]), evidenceContains: "as /proc/locks records it"),
        CorpusCase(
            name: "python fcntl lock held by another process", command: python("fcntl-lock"),
            expect: .stall(.lock, frames: ["fcntl"]), evidenceContains: "as /proc/locks records it"),
        // Reads whose other end another process holds: that process is named, with its thread's state.
        CorpusCase(
            name: "python read of a command's output pipe", command: python("pipe-read"),
            expect: .stall(.io, frames: ["read"]), evidenceContains: "holds the write end of the pipe the loop reads",
            blockingProcess: "sleep"),
        CorpusCase(
            name: "python request to a local daemon over a Unix socket", command: python("unix-socket"),
            expect: .stall(.io, frames: ["recv"]), evidenceContains: "by sock_diag", blockingProcess: "status-daemon"),
        CorpusCase(
            name: "python request to a slow loopback HTTP backend", command: python("tcp-loopback"),
            expect: .stall(.io, frames: ["recv", "read"]), evidenceContains: "loopback TCP connection",
            blockingProcess: "http-backend"),
        // A multiprocessing.Lock (a POSIX semaphore in shared memory) a worker process holds: the one other process
        // mapping it that does not wait on it is the likely holder.
        CorpusCase(
            name: "python multiprocessing lock held by a worker process", command: python("mp-lock"),
            expect: .stall(.lock, frames: ["sem_", "futex"]), evidenceContains: "the lock is process-shared",
            candidateProcess: "batch-writer"),
        // A timed select on its own non-blocking wake-up pipe: nothing outside can end it, a sleep.
        CorpusCase(
            name: "python timed wait on its own wake-up pipe", command: python("self-pipe-sleep"),
            expect: .stall(.sleep, frames: ["select"]), evidenceContains: "own wake-up descriptor"),
        // logging's handler lock (a threading.RLock) held by a thread whose record a slow collector is taking:
        // the RLock records its owner's handle beside the semaphore it waits on, and that thread is named.
        CorpusCase(
            name: "python logging handler lock held by another thread", command: python("logging-lock"),
            expect: .stall(.lock, frames: ["sem_", "futex", "lll_lock"]),
            evidenceContains: "the lock's own structure records thread", candidateThread: "audit"),
        // Two RLocks taken crosswise while the thread pool's workers idle on locks of their own (so the candidates
        // alone are ambiguous): each RLock records its holder, and the two records close the cycle.
        CorpusCase(
            name: "python deadlock of two RLocks beside an idle thread pool", command: python("rlock-deadlock", "1.5"),
            expect: .stall(.deadlock, frames: ["sem_", "futex", "lll_lock"], deadlock: true),
            evidenceContains: "waits for a lock recorded as held by the loop thread: likely a deadlock",
            candidateThread: "reindex"),
        CorpusCase(
            name: "python timed lock", command: python("timed-lock"),
            expect: .stall(.lock, frames: ["sem_", "futex", "lll_lock"])),
        // The same service started with the lock book preloaded (as `stallwatch run --lock-book` starts it): the
        // thread that took the semaphore last and has not posted it is named, for plain, timed and crosswise waits.
        CorpusCase(
            name: "python ownerless lock with the lock book", command: python("lock"),
            expect: .stall(.lock, frames: ["sem_", "futex", "lll_lock"]),
            evidenceContains: "the process's lock book records thread", candidateThread: "lock-holder",
            environment: lockBook),
        CorpusCase(
            name: "python timed lock with the lock book", command: python("timed-lock"),
            expect: .stall(.lock, frames: ["sem_", "futex", "lll_lock"]),
            evidenceContains: "the process's lock book records thread", candidateThread: "lock-holder",
            environment: lockBook),
        CorpusCase(
            name: "python deadlock of two ownerless locks with the lock book", command: python("deadlock", "1.5"),
            expect: .stall(.deadlock, frames: ["sem_", "futex", "lll_lock"], deadlock: true),
            evidenceContains: "waits for a lock recorded as held by the loop thread: likely a deadlock",
            candidateThread: "ledger-worker", environment: lockBook),
    ]

    static let lockBook = ["LD_PRELOAD": SidecarFixtures.executable("libStallWatchLockBook.so")]

    @Test(.timeLimit(.minutes(3)), arguments: cases)
    func eachStallOfACPythonServiceIsDiagnosedFromOutside(_ c: CorpusCase) throws {
        try CorpusHarness.check(c)
    }
}
