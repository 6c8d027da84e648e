// ElasticThreadExecutor: a task executor that never lets one blocked job keep another from running, and the async
// limiter that bounds how many tests use one at once.
import Foundation
import Synchronization

/// A `TaskExecutor` that runs each job on an idle thread of its own and starts another thread whenever more jobs are
/// queued than threads wait for them — so a job that blocks (a synchronous test waiting for a child process) never
/// delays another job, as it would on the fixed-width cooperative pool.
///
/// Threads are started on demand and end once ``close()`` was called and no job is left.
package final class ElasticThreadExecutor: TaskExecutor, @unchecked Sendable {
    // `condition` guards `jobs`, `idle` and `closed`.
    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    private var idle = 0
    private var closed = false
    private let name: String

    package init(name: String) {
        self.name = name
    }

    package func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        jobs.append(job)
        // Every queued job needs a thread of its own: a waiting one if enough wait, a new one otherwise.
        let needsThread = jobs.count > idle
        if !needsThread { condition.signal() }
        condition.unlock()
        if needsThread { startThread() }
    }

    /// Lets the threads end once the queue is empty. Jobs enqueued later still run, on a new thread.
    package func close() {
        condition.lock()
        closed = true
        condition.broadcast()
        condition.unlock()
    }

    private func startThread() {
        let thread = Thread { [self] in work() }
        thread.name = name
        thread.start()
    }

    private func work() {
        condition.lock()
        while true {
            if !jobs.isEmpty {
                let job = jobs.removeFirst()
                condition.unlock()
                job.runSynchronously(on: asUnownedTaskExecutor())
                condition.lock()
            } else if closed {
                break
            } else {
                idle += 1
                condition.wait()
                idle -= 1
            }
        }
        condition.unlock()
    }
}

/// An async counting semaphore: ``acquire()`` suspends (holding no thread) until one of `width` places is free.
package final class AsyncLimiter: Sendable {
    private let state: Mutex<(free: Int, waiting: [CheckedContinuation<Void, Never>])>

    package init(width: Int) {
        state = Mutex((free: width, waiting: []))
    }

    package func acquire() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let granted = state.withLock { state -> Bool in
                guard state.free > 0 else {
                    state.waiting.append(continuation)
                    return false
                }
                state.free -= 1
                return true
            }
            if granted { continuation.resume() }
        }
    }

    package func release() {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard !state.waiting.isEmpty else {
                state.free += 1
                return nil
            }
            return state.waiting.removeFirst()
        }
        next?.resume()
    }
}
