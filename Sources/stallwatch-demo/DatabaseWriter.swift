// The demo's background "database": a writer thread that holds its lock for long writes.
import Foundation
import StallWatch
import StallWatchRemedies
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A background thread standing in for a database client: it batches rows, and every `checkpointInterval` it
/// holds `lock` for a long write (a checkpoint). Whoever else needs `lock` waits for the checkpoint.
///
/// The unremedied service inserts each row itself under `lock` on the loop (``insertHoldingLock(_:)``), so its
/// loop waits out every checkpoint. The remedied one hands rows to the writer through a ``ThreadSafeArray`` and
/// gets the completion back on the loop (``insert(_:holdMs:completion:)``): the loop never takes `lock`.
final class DatabaseWriter: @unchecked Sendable {  // rows: guarded by lock
    struct Command: Sendable {
        var row: String
        /// How long the write holds the lock (a long transaction); 0 for an ordinary insert.
        var holdMs: Int
        var completion: (@Sendable () -> Void)?
        /// Signalled once the writer holds the lock for this command (the injected contention waits for it).
        var held: DispatchSemaphore?
    }

    let lock = TimedMutex()
    private var rows = 0
    private let commands = ThreadSafeArray<Command>(label: "demo.db.commands")
    private let wake = DispatchSemaphore(value: 0)
    private let stopped = Atomic<Bool>(false)
    private let loop: EventLoop
    private let checkpointIntervalMs: Int
    private let checkpointMs: Int
    private var thread: Thread?

    init(loop: EventLoop, checkpointIntervalMs: Int = 250, checkpointMs: Int = 30) {
        self.loop = loop
        self.checkpointIntervalMs = checkpointIntervalMs
        self.checkpointMs = checkpointMs
    }

    func start() {
        let thread = Thread { [self] in run() }
        thread.name = "demo-db-writer"
        thread.start()
        self.thread = thread
    }

    func stop() {
        stopped.store(true, ordering: .releasing)
        wake.signal()
    }

    var rowCount: Int {
        lock.lock()
        defer { lock.unlock() }
        return rows
    }

    /// Inserts a row under the database lock on the calling thread: waits out any checkpoint in progress.
    func insertHoldingLock(_ row: String) {
        lock.lock()
        rows += 1
        lock.unlock()
    }

    /// Hands a row to the writer thread; `completion` runs on the loop once it is written. Any thread.
    func insert(_ row: String, holdMs: Int = 0, completion: (@Sendable () -> Void)? = nil) {
        commands.append(Command(row: row, holdMs: holdMs, completion: completion, held: nil))
        wake.signal()
    }

    /// Makes the writer take the lock and hold it for `ms`; returns once it holds it.
    func beginLongWrite(ms: Int) {
        let held = DispatchSemaphore(value: 0)
        commands.append(Command(row: "long write", holdMs: ms, completion: nil, held: held))
        wake.signal()
        held.wait()
    }

    private func run() {
        var nextCheckpoint = DispatchTime.now().uptimeNanoseconds + UInt64(checkpointIntervalMs) * 1_000_000
        while !stopped.load(ordering: .acquiring) {
            let now = DispatchTime.now().uptimeNanoseconds
            if now >= nextCheckpoint {
                lock.lock()
                Stalls.sleepFor(milliseconds: checkpointMs)  // the checkpoint: a long write under the lock
                lock.unlock()
                nextCheckpoint = DispatchTime.now().uptimeNanoseconds + UInt64(checkpointIntervalMs) * 1_000_000
                continue
            }
            _ = wake.wait(timeout: .now() + .nanoseconds(Int(nextCheckpoint - now)))
            for command in commands.removeAllAndReturn() {
                lock.lock()
                command.held?.signal()
                if command.holdMs > 0 { Stalls.sleepFor(milliseconds: command.holdMs) }
                rows += 1
                lock.unlock()
                if let completion = command.completion { loop.perform(completion) }
            }
        }
    }
}
