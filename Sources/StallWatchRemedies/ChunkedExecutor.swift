// Chunked execution: a long job on the loop, cut into short chunks with the loop turning in between.
import Synchronization

/// Runs long jobs on the loop in short chunks, yielding to the loop between chunks, so timers, I/O and other
/// work interleave and no single busy phase approaches a stall threshold.
///
/// A job is a step function called repeatedly until it returns false. The executor calls it until the chunk's
/// time budget (or step limit) is spent, then enqueues the next chunk as a separate block: the loop finishes the
/// current turn, fires due timers, serves ready sources, and comes back to it. The completion runs on the loop
/// after the last step.
///
/// Use it for work that must happen on the loop (it touches loop-confined state) but is too big for one turn:
/// re-sorting a large list, rebuilding an index, migrating a cache. Work that need not touch loop state is
/// better moved off the loop (``BackgroundWorker``, ``BackgroundRecomputer``).
///
/// ```swift
/// let chunks = ChunkedExecutor(scheduler: loop, timeBudget: .milliseconds(5))
/// chunks.sort(sessions, by: Session.displayOrder) { sorted in model.sessions = sorted }
/// ```
public final class ChunkedExecutor: Sendable {
    private let scheduler: any LoopScheduler
    /// Loop time one chunk may use.
    public let timeBudget: Duration
    /// Steps one chunk may run, whatever the time (tests use it to make chunking deterministic).
    public let maxStepsPerChunk: Int
    private let budgetNanos: UInt64

    /// - Parameters:
    ///   - scheduler: The loop the chunks run on.
    ///   - timeBudget: Loop time per chunk; a chunk runs at least one step, then stops once this has passed.
    ///   - maxStepsPerChunk: Steps per chunk at most.
    public init(scheduler: any LoopScheduler, timeBudget: Duration = .milliseconds(5), maxStepsPerChunk: Int = .max) {
        precondition(maxStepsPerChunk > 0, "maxStepsPerChunk must be positive")
        self.scheduler = scheduler
        self.timeBudget = timeBudget
        self.maxStepsPerChunk = maxStepsPerChunk
        self.budgetNanos = ManualScheduler.nanos(timeBudget)
    }

    /// Runs `step` on the loop, chunk after chunk, until it returns false; then runs `completion` on the loop.
    ///
    /// - Parameters:
    ///   - step: One small piece of the job; returns true while there is more to do.
    ///   - completion: Runs on the loop after the last step (not when the job is cancelled).
    /// - Returns: The job, to cancel it or ask how it went.
    /// - Warning: `step` and `completion` run on the loop thread; keep each step far below the time budget.
    @discardableResult
    public func run(
        _ step: @escaping @Sendable () -> Bool, completion: @escaping @Sendable () -> Void = {}
    ) -> ChunkedJob {
        let job = ChunkedJob()
        scheduler.enqueue { [self] in runChunk(job, step: step, completion: completion) }
        return job
    }

    /// Calls `body` for each element of `elements` on the loop, in chunks, then `completion`.
    @discardableResult
    public func forEach<C: Collection & Sendable>(
        _ elements: C, _ body: @escaping @Sendable (C.Element) -> Void,
        completion: @escaping @Sendable () -> Void = {}
    ) -> ChunkedJob where C.Index: Sendable {
        let cursor = Mutex(elements.startIndex)
        return run(
            {
                cursor.withLock { index in
                    guard index != elements.endIndex else { return false }
                    body(elements[index])
                    elements.formIndex(after: &index)
                    return index != elements.endIndex
                }
            }, completion: completion)
    }

    /// Sorts `elements` on the loop in chunks (a merge sort whose every step is bounded), then hands the sorted
    /// array to `completion` on the loop.
    ///
    /// - Parameters:
    ///   - elements: What to sort (a copy is sorted; the caller's array is untouched).
    ///   - areInIncreasingOrder: A strict weak ordering, as for `sorted(by:)`. The sort is stable.
    ///   - completion: Receives the sorted elements on the loop.
    @discardableResult
    public func sort<T: Sendable>(
        _ elements: [T], by areInIncreasingOrder: @escaping @Sendable (T, T) -> Bool,
        completion: @escaping @Sendable ([T]) -> Void
    ) -> ChunkedJob {
        let sorter = Mutex(ChunkedMergeSort(elements, by: areInIncreasingOrder))
        return run({ sorter.withLock { $0.step() } }, completion: { completion(sorter.withLock { $0.result }) })
    }

    private func runChunk(
        _ job: ChunkedJob, step: @escaping @Sendable () -> Bool, completion: @escaping @Sendable () -> Void
    ) {
        guard !job.isCancelled else { return }
        let start = scheduler.uptimeNanos
        var steps = 0
        while true {
            let more = step()
            steps += 1
            if !more {
                job.finish(steps: steps)
                completion()
                return
            }
            if job.isCancelled { return }
            if steps >= maxStepsPerChunk || scheduler.uptimeNanos &- start >= budgetNanos { break }
        }
        job.recordChunk(steps: steps)
        // Yield: the next chunk is a separate block, run after the loop has turned once more.
        scheduler.enqueue { [self] in runChunk(job, step: step, completion: completion) }
    }
}

/// A job started by a ``ChunkedExecutor``.
public final class ChunkedJob: Sendable {
    private struct State {
        var cancelled = false
        var finished = false
        var chunks = 0
        var steps = 0
    }

    private let state = Mutex(State())

    init() {}

    /// Stops the job before its next step; its completion does not run. Safe from any thread.
    public func cancel() { state.withLock { $0.cancelled = true } }

    public var isCancelled: Bool { state.withLock { $0.cancelled } }

    /// True once the last step has run.
    public var isFinished: Bool { state.withLock { $0.finished } }

    /// Chunks run so far (each a separate loop callout).
    var chunkCount: Int { state.withLock { $0.chunks } }

    /// Steps run so far.
    var stepCount: Int { state.withLock { $0.steps } }

    func recordChunk(steps: Int) {
        state.withLock {
            $0.chunks += 1
            $0.steps += steps
        }
    }

    func finish(steps: Int) {
        state.withLock {
            $0.chunks += 1
            $0.steps += steps
            $0.finished = true
        }
    }
}

/// A bottom-up merge sort that advances by bounded steps: first sorts short runs, then merges at most
/// `mergeStep` elements per step, so no step costs more than a few thousand comparisons whatever the size.
struct ChunkedMergeSort<T> {
    private var source: [T]
    private var destination: [T]
    private let areInIncreasingOrder: (T, T) -> Bool
    private let runLength = 128
    private let mergeStep = 4096
    // Phase 1: the next run to sort in place. Phase 2: the merge in progress.
    private var nextRun = 0
    private var width: Int
    private var low = 0, left = 0, right = 0, out = 0
    private var merging = false

    init(_ elements: [T], by areInIncreasingOrder: @escaping (T, T) -> Bool) {
        source = elements
        destination = []
        self.areInIncreasingOrder = areInIncreasingOrder
        width = runLength
    }

    var result: [T] { source }

    /// Does one bounded piece of work; returns true while there is more.
    mutating func step() -> Bool {
        let count = source.count
        if nextRun < count {
            let end = min(nextRun + runLength, count)
            // Insertion sort keeps equal elements in order (the standard library's sort is not stable).
            for i in (nextRun + 1)..<max(end, nextRun + 1) {
                let item = source[i]
                var j = i
                while j > nextRun && areInIncreasingOrder(item, source[j - 1]) {
                    source[j] = source[j - 1]
                    j -= 1
                }
                source[j] = item
            }
            nextRun = end
            return nextRun < count || width < count
        }
        guard width < count else { return false }
        if destination.count != count { destination = source }
        var budget = mergeStep
        while budget > 0 {
            let mid = min(low + width, count)
            let high = min(low + 2 * width, count)
            if !merging {
                left = low
                right = mid
                out = low
                merging = true
            }
            while out < high && budget > 0 {
                // Take from the left run on ties: stable.
                if left < mid && (right >= high || !areInIncreasingOrder(source[right], source[left])) {
                    destination[out] = source[left]
                    left += 1
                } else {
                    destination[out] = source[right]
                    right += 1
                }
                out += 1
                budget -= 1
            }
            if out < high { return true }
            merging = false
            low = high
            if low >= count {
                // One pass done: the merged runs become the source of the next pass, twice as wide.
                swap(&source, &destination)
                width *= 2
                low = 0
                return width < count
            }
        }
        return true
    }
}
