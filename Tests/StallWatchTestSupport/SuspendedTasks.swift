// SuspendedTasks: Swift tasks that suspend on a continuation until a test resumes them, with their task ids.
import StallWatch
import Synchronization

/// Starts `count` unstructured tasks that each note their task id and then await a `CheckedContinuation` nobody
/// resumes until ``resumeAll()``: the shape of a wait for a reply that has not come.
package final class SuspendedTasks: Sendable {
    private let state = Mutex<(ids: [UInt64], waiting: [CheckedContinuation<Void, Never>])>(([], []))
    private let finished = Mutex<Int>(0)
    package let count: Int

    package init(count: Int) {
        self.count = count
        for _ in 0..<count {
            Task.detached {
                await self.awaitReplyThatComesLate()
                self.finished.withLock { $0 += 1 }
            }
        }
    }

    private func awaitReplyThatComesLate() async {
        let id = ConcurrencyWatchdog.currentTaskID ?? 0
        await withCheckedContinuation { continuation in
            state.withLock { state in
                state.ids.append(id)
                state.waiting.append(continuation)
            }
        }
    }

    /// The ids of the tasks suspended so far (0 for a task that ran while the pool was not watched).
    package var ids: [UInt64] { state.withLock { $0.ids } }
    /// True once every task has registered its continuation (it is then suspended, or about to be).
    package var allWaiting: Bool { state.withLock { $0.waiting.count } == count }
    /// Tasks that have finished after ``resumeAll()``.
    package var finishedCount: Int { finished.withLock { $0 } }

    /// Resumes every task that is waiting.
    package func resumeAll() {
        let waiting = state.withLock { state in
            defer { state.waiting.removeAll() }
            return state.waiting
        }
        for continuation in waiting { continuation.resume() }
    }
}
