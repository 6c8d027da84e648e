// TaskTableEntry: one row of the task table as readers see it, decoded from its published form without trusting it.
import CStallWatchCore

/// A task of the table, as read from its row (in this process, or from the published file by a sidecar).
///
/// Decoding checks every code and bound, since the file may have been written by anyone: an unknown state or wait
/// kind, a frame count past the chain's size, or times after the reading moment make the row unreadable (nil).
package struct TaskTableEntry: Sendable, Equatable {
    package enum State: String, Sendable, Codable {
        case running, suspended, enqueued, unknown
    }

    package enum WaitKind: String, Sendable, Codable {
        case continuation, task, taskGroup, executor, unknown
    }

    package var id: UInt64
    package var name: String?
    package var priority: Int
    package var state: State
    /// CLOCK_MONOTONIC times of the publisher.
    package var firstSeenNanos: UInt64
    package var lastStartNanos: UInt64
    package var lastEndNanos: UInt64
    /// Since when the task has been in `state`.
    package var sinceNanos: UInt64
    /// True when the task may have run unseen since `sinceNanos` (on an actor): its age is at most now − since.
    package var ageIsUpperBound: Bool
    package var runs: Int
    package var threadID: Int32
    /// What it waits for, once its row was validated (nil before, or when it waits for nothing).
    package var waitKind: WaitKind?
    /// A task wait's awaited task, when read and checked.
    package var awaitedTaskID: UInt64?
    /// The awaited continuation context, task group or executor: an identity to compare, never read.
    package var waitAddress: UInt64?
    package var isValidated: Bool
    package var isExempt: Bool
    package var isHung: Bool
    /// It waits on its own child tasks (a task group, an `async let`): its children carry the wait.
    package var waitsOnChildren: Bool
    package var isChild: Bool
    package var isGroupChild: Bool
    package var isAsyncLet: Bool
    /// Resume points of its async backtrace, innermost first (empty before validation).
    package var asyncFrames: [UInt64]
    package var framesTruncated: Bool

    /// Decodes `row`, reading its backtrace through `chain` (index → chain, or nil). Nil for a free or invalid row.
    package init?(row: sw_task_row, now: UInt64, chain: (UInt32) -> sw_task_chain?) {
        guard row.sequence & 1 == 0, row.task_id != 0 else { return nil }
        switch Int32(row.state) {
        case Int32(SW_TASK_RUNNING): state = .running
        case Int32(SW_TASK_SUSPENDED): state = .suspended
        case Int32(SW_TASK_ENQUEUED): state = .enqueued
        case Int32(SW_TASK_UNKNOWN): state = .unknown
        default: return nil
        }
        let flags = Int32(row.flags)
        func has(_ flag: Int32) -> Bool { flags & flag != 0 }
        isValidated = has(Int32(SW_TASK_VALIDATED))
        switch Int32(row.wait_kind) {
        case Int32(SW_WAIT_NONE): waitKind = nil
        case Int32(SW_WAIT_TASK): waitKind = .task
        case Int32(SW_WAIT_CONTINUATION): waitKind = .continuation
        case Int32(SW_WAIT_TASK_GROUP): waitKind = .taskGroup
        case Int32(SW_WAIT_EXECUTOR): waitKind = .executor
        case Int32(SW_WAIT_UNKNOWN): waitKind = .unknown
        default: return nil
        }
        // Times come from the publisher's clock: none may lie in the reader's future (another time namespace, or
        // a writer that is not StallWatch), and they must be in order.
        let slack: UInt64 = 1_000_000_000
        guard row.first_seen_ns <= row.last_start_ns, row.last_start_ns <= row.last_end_ns,
            row.last_end_ns <= now &+ slack, row.since_ns <= now &+ slack, row.first_seen_ns > 0
        else { return nil }
        id = row.task_id
        priority = Int(row.priority)
        firstSeenNanos = row.first_seen_ns
        lastStartNanos = row.last_start_ns
        lastEndNanos = row.last_end_ns
        sinceNanos = row.since_ns
        ageIsUpperBound = has(Int32(SW_TASK_AGE_AT_MOST))
        runs = Int(row.runs)
        threadID = row.thread_id
        awaitedTaskID = has(Int32(SW_TASK_TARGET_VALIDATED)) && row.wait_target_id != 0 ? row.wait_target_id : nil
        waitAddress = row.wait_address == 0 ? nil : row.wait_address
        isExempt = has(Int32(SW_TASK_EXEMPT))
        isHung = has(Int32(SW_TASK_HUNG))
        waitsOnChildren = has(Int32(SW_TASK_STRUCTURED_WAIT))
        isChild = has(Int32(SW_TASK_CHILD))
        isGroupChild = has(Int32(SW_TASK_GROUP_CHILD))
        isAsyncLet = has(Int32(SW_TASK_ASYNC_LET))
        let nameBytes = withUnsafeBytes(of: row.name) { Array($0) }
        guard let end = nameBytes.firstIndex(of: 0) else { return nil }
        // Another user's process may have written it: printable text only.
        let text = PrintableText.filtered(String(decoding: nameBytes[..<end], as: UTF8.self))
        name = text.isEmpty ? nil : text
        asyncFrames = []
        framesTruncated = false
        if row.chain != 0 {
            guard let found = chain(row.chain), Int(found.frame_count) <= Int(SW_TASKS_FRAMES) else { return nil }
            asyncFrames = withUnsafeBytes(of: found.frames) { raw in
                Array(raw.bindMemory(to: UInt64.self).prefix(Int(found.frame_count)))
            }
            framesTruncated = found.truncated != 0
        }
    }

    /// How long the task has been in its state at `now` (the publisher's clock).
    package func age(at now: UInt64) -> UInt64 { now > sinceNanos ? now - sinceNanos : 0 }
}
