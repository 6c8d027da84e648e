// Off-loop work with on-loop completion: blocking calls run on a serial queue, their results come back to the loop.
import Dispatch
import Synchronization

/// Runs blocking work (disk writes with fsync, lock-taking database calls, DNS) on its own serial queue and
/// delivers each result on the loop, so the loop never waits for it.
///
/// Jobs run one at a time in submission order (a journal stays ordered); completions run on the loop in the same
/// order.
///
/// ```swift
/// let disk = BackgroundWorker(scheduler: loop, label: "journal")
/// disk.submit({ try journal.appendAndSync(record) }) { result in respond(result) }   // completion on the loop
/// ```
public final class BackgroundWorker: Sendable {
    private let scheduler: any LoopScheduler
    private let queue: DispatchQueue
    private let counts = Mutex((submitted: 0, completed: 0))

    /// - Parameters:
    ///   - scheduler: The loop completions run on.
    ///   - label: The queue's label (seen in stack reports and debuggers).
    ///   - qos: The queue's quality of service.
    public init(scheduler: any LoopScheduler, label: String, qos: DispatchQoS = .utility) {
        self.scheduler = scheduler
        self.queue = DispatchQueue(label: label, qos: qos)
    }

    /// Runs `work` off the loop, then `completion` with its result on the loop. Safe from any thread.
    ///
    /// - Parameters:
    ///   - work: Runs on the worker's queue; may block.
    ///   - completion: Runs on the loop thread with what `work` returned or threw.
    public func submit<T: Sendable>(
        _ work: @escaping @Sendable () throws -> T,
        completion: @escaping @Sendable (Result<T, any Error>) -> Void
    ) {
        counts.withLock { $0.submitted += 1 }
        queue.async { [self] in
            let result = Result { try work() }
            scheduler.enqueue { [self] in
                counts.withLock { $0.completed += 1 }
                completion(result)
            }
        }
    }

    /// Jobs submitted and not yet completed on the loop.
    public var outstandingCount: Int { counts.withLock { $0.submitted - $0.completed } }
}
