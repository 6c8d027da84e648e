// Timers of an EventLoop: one-shot and repeating, with tolerance, kept in a heap on the loop thread.
import Synchronization

/// A timer scheduled on an ``EventLoop``. Cancel it from any thread.
public final class LoopTimer: Sendable {
    /// Nanoseconds between fires; 0 for a one-shot timer.
    let intervalNanos: UInt64
    /// How late the timer may fire, so the loop can wake once for several timers.
    let toleranceNanos: UInt64
    /// The timer's lead-up label (``LeadUpLabels``).
    let label: UInt32
    let block: @Sendable () -> Void
    private let cancelled = Atomic<Bool>(false)

    init(intervalNanos: UInt64, toleranceNanos: UInt64, label: UInt32 = 0, block: @escaping @Sendable () -> Void) {
        self.intervalNanos = intervalNanos
        self.toleranceNanos = toleranceNanos
        self.label = label
        self.block = block
    }

    /// Stops the timer; a fire already running completes.
    public func cancel() { cancelled.store(true, ordering: .releasing) }
    var isCancelled: Bool { cancelled.load(ordering: .acquiring) }
}

/// A min-heap of pending fires ordered by their latest acceptable time (fire date + tolerance). Loop thread only.
struct TimerQueue {
    package struct Entry {
        var fireAt: UInt64
        var timer: LoopTimer
        var deadline: UInt64 { fireAt &+ timer.toleranceNanos }
    }

    private var heap: [Entry] = []

    var isEmpty: Bool { heap.isEmpty }
    var count: Int { heap.count }

    /// When the loop must be awake to honour every timer's tolerance.
    var nextDeadline: UInt64? { heap.first?.deadline }

    mutating func insert(_ timer: LoopTimer, fireAt: UInt64) {
        heap.append(Entry(fireAt: fireAt, timer: timer))
        var child = heap.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard heap[child].deadline < heap[parent].deadline else { break }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    /// Removes and returns the top entry if its fire date has come (and drops cancelled timers on the way).
    mutating func popDue(now: UInt64) -> Entry? {
        while let top = heap.first {
            if top.timer.isCancelled {
                removeTop()
                continue
            }
            guard top.fireAt <= now else { return nil }
            removeTop()
            return top
        }
        return nil
    }

    private mutating func removeTop() {
        heap.swapAt(0, heap.count - 1)
        heap.removeLast()
        var parent = 0
        while true {
            let left = 2 * parent + 1
            let right = left + 1
            var smallest = parent
            if left < heap.count, heap[left].deadline < heap[smallest].deadline { smallest = left }
            if right < heap.count, heap[right].deadline < heap[smallest].deadline { smallest = right }
            if smallest == parent { return }
            heap.swapAt(parent, smallest)
            parent = smallest
        }
    }
}
