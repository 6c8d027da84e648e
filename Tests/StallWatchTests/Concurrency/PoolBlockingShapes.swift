import CStallWatchCore
// The five ways a job blocks the Concurrency pool that the pool watchdog must catch, as named functions.
import Dispatch
import Glibc
import Synchronization

@testable import StallWatch

/// Blocking shapes run on the pool at `.utility` priority (tests pick their reports by that priority), each in a
/// task named after it (``taskName(_:)``).
enum PoolBlockingShapes {
    /// The thread and task the last shape blocked, for picking its report among others of the process.
    static let blockedThread = Mutex<Int32>(0)
    static let blockedTask = Mutex<UInt64>(0)
    /// How long the last shape's blocking call really took, ms (a loaded machine oversleeps).
    static let blockedMs = Mutex<Double>(0)
    /// The blocked thread's run-queue wait (schedstat, ns) as the shape's blocking function began: against a later
    /// reading, how long a loaded machine kept the job's thread from a CPU.
    static let runQueueAtStart = Mutex<UInt64>(0)

    /// Notes the blocked thread, task and run-queue wait, first thing in a blocking function.
    static func noteBlockedThread() {
        let tid = sw_gettid()
        let wait = ProcDirectory(processID: getpid(), threadID: tid).schedstat(now: 0)?.runQueueWaitNanos ?? 0
        runQueueAtStart.withLock { $0 = wait }
        blockedThread.withLock { $0 = tid }
        blockedTask.withLock { $0 = ConcurrencyWatchdog.currentTaskID ?? 0 }
    }

    /// How long the blocked thread has waited for a CPU since its blocking function began, ms.
    static func runQueueMsSinceStart() -> Double {
        let tid = blockedThread.withLock { $0 }
        let now = ProcDirectory(processID: getpid(), threadID: tid).schedstat(now: 0)?.runQueueWaitNanos ?? 0
        let start = runQueueAtStart.withLock { $0 }
        return now >= start ? Double(now - start) / 1e6 : 0
    }

    static func measure(_ body: () -> Void) {
        let start = ContinuousClock.now
        body()
        let elapsed = ContinuousClock.now - start
        blockedMs.withLock {
            $0 = Double(elapsed.components.seconds) * 1e3 + Double(elapsed.components.attoseconds) / 1e15
        }
    }

    @inline(never)
    static func blockInUsleep(milliseconds: Int) {
        noteBlockedThread()
        measure { usleep(UInt32(milliseconds * 1000)) }
    }

    @inline(never)
    static func spinOnCPU(milliseconds: Int) {
        noteBlockedThread()
        measure {
            let end = ContinuousClock.now + .milliseconds(milliseconds)
            var sum = 0
            while ContinuousClock.now < end { sum &+= 1 }
            precondition(sum > 0)
        }
    }

    /// An actor whose method blocks its executor's worker.
    actor Store {
        func blockingSave(milliseconds: Int) {
            PoolBlockingShapes.blockInUsleep(milliseconds: milliseconds)
        }
    }

    /// The name of the task that runs `shape`.
    static func taskName(_ shape: Shape) -> String { "pool-shape-\(shape.rawValue)" }

    /// The function each shape blocks in, as its samples name it.
    static func blockingFunction(_ shape: Shape) -> String { shape == .cpu ? "spinOnCPU" : "blockInUsleep" }

    /// Runs `shape` as a detached `.utility` task; returns once the task is done.
    static func run(_ shape: Shape, milliseconds: Int) async {
        let task = Task.detached(name: taskName(shape), priority: .utility) {
            switch shape {
            case .usleep:
                blockInUsleep(milliseconds: milliseconds)
            case .cpu:
                spinOnCPU(milliseconds: milliseconds)
            case .afterTaskSleep:
                try? await Task.sleep(for: .milliseconds(20))
                blockInUsleep(milliseconds: milliseconds)
            case .actorMethod:
                await Store().blockingSave(milliseconds: milliseconds)
            case .afterContinuation:
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(20)) { continuation.resume() }
                }
                blockInUsleep(milliseconds: milliseconds)
            }
        }
        await task.value
    }

    enum Shape: String, CaseIterable, Sendable {
        case usleep, cpu, afterTaskSleep, actorMethod, afterContinuation
    }
}
