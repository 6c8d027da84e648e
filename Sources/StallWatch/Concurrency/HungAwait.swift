// HungAwait: one task found suspended past the threshold, with what it waits on, read and checked from memory.
import CStallWatchConcurrency
import CStallWatchCore

/// What the watchdog knows of one hung await when it reports it: the task, its wait, the chain of tasks it waits
/// on, the tasks waiting on it, and its async backtrace, each read from the task's memory and checked (see
/// `sw_task_read.h`). Built on the pool watchdog's thread.
struct HungAwait: Sendable {
    var taskID: UInt64
    var taskName: String?
    var priority: Int
    var threadID: Int32
    var waitKind: TaskTableEntry.WaitKind
    var waitAddress: UInt64?
    /// Why the wait is `unknown`: the check of the runtime's record that failed (nil when it checked out).
    var waitCheck: String?
    /// CLOCK_MONOTONIC.
    var sinceNanos: UInt64
    var firstSeenNanos: UInt64
    var ageIsUpperBound: Bool
    var runs: Int
    var site: AwaitSite
    var chain: [StallReport.HungAwaitDescription.ChainLink]
    var chainEnd: String?
    var awaitedBy: [StallReport.HungAwaitDescription.TaskReference]

    /// Most tasks followed down a chain of task waits.
    static let maxChain = 16

    static func waitKind(_ code: UInt8) -> TaskTableEntry.WaitKind {
        switch Int32(code) {
        case Int32(SW_WAIT_TASK): return .task
        case Int32(SW_WAIT_CONTINUATION): return .continuation
        case Int32(SW_WAIT_TASK_GROUP): return .taskGroup
        case Int32(SW_WAIT_EXECUTOR): return .executor
        default: return .unknown
        }
    }

    static func describeCheck(_ code: UInt32) -> String? {
        switch Int32(code) {
        case Int32(SW_WAIT_CHECK_NO_RECORD): return "the task's status says it has no dependency record"
        case Int32(SW_WAIT_CHECK_NOT_INNERMOST): return "its innermost status record is not its dependency record"
        case Int32(SW_WAIT_CHECK_UNREADABLE): return "its dependency record could not be read"
        case Int32(SW_WAIT_CHECK_MISMATCH): return "the record names another task, or a kind this reader does not know"
        case Int32(SW_WAIT_CHECK_STATE): return "the record's kind does not fit the task's state"
        case Int32(SW_WAIT_CHECK_TARGET): return "what the record names does not check out"
        case Int32(SW_WAIT_CHECK_GROUP): return "the task group's record is not among the task's records"
        default: return nil
        }
    }

    static func stateName(_ code: UInt8) -> String {
        switch Int32(code) {
        case Int32(SW_TASK_RUNNING): return "running"
        case Int32(SW_TASK_ENQUEUED): return "enqueued"
        default: return "suspended"
        }
    }

    /// The hung await of `state` (its task just read, suspended), with the table's row for its times.
    ///
    /// - Parameters:
    ///   - row: The task's row, copied after the read.
    ///   - runtime: The reader's view of this process's runtime.
    ///   - names: Symbolicates resume points (the pool watchdog's names-only symbolicator).
    ///   - now: CLOCK_MONOTONIC.
    init(
        state: sw_task_state, row: sw_task_row, runtime: UnsafePointer<sw_task_runtime>,
        names: (_ frames: [UInt64]) -> [StackFrame], now: UInt64
    ) {
        taskID = state.id
        taskName = Self.name(of: state)
        priority = Int(state.priority)
        threadID = row.thread_id
        waitKind = Self.waitKind(state.wait_kind)
        waitAddress = state.wait_address == 0 ? nil : state.wait_address
        waitCheck = Self.describeCheck(state.wait_check)
        sinceNanos = row.since_ns
        firstSeenNanos = row.first_seen_ns
        ageIsUpperBound = Int32(row.flags) & Int32(SW_TASK_AGE_AT_MOST) != 0
        runs = Int(row.runs)
        site = AwaitSite(frames: names(Self.frames(of: state)))
        chain = []
        awaitedBy = []
        if waitKind == .task, Int32(state.flags) & Int32(SW_TASK_TARGET_VALIDATED) != 0 {
            (chain, chainEnd) = Self.follow(from: state, runtime: runtime, names: names, now: now)
        }
        if state.parent_address != 0, let waiter = Self.waiter(of: state, runtime: runtime) { awaitedBy = [waiter] }
    }

    static func frames(of state: sw_task_state) -> [UInt64] {
        withUnsafeBytes(of: state.frames) { raw in
            Array(raw.bindMemory(to: UInt64.self).prefix(Int(min(state.frame_count, UInt32(SW_TASK_MAX_FRAMES)))))
        }
    }

    static func name(of state: sw_task_state) -> String? {
        guard state.name_length > 0 else { return nil }
        let bytes = withUnsafeBytes(of: state.name) { Array($0.prefix(Int(min(state.name_length, 255)))) }
        let text = PrintableText.filtered(String(decoding: bytes, as: UTF8.self))
        return text.isEmpty ? nil : text
    }

    /// The awaited tasks, each read and checked, down to one that waits on no task, or until the chain loops back.
    private static func follow(
        from state: sw_task_state, runtime: UnsafePointer<sw_task_runtime>, names: ([UInt64]) -> [StackFrame],
        now: UInt64
    ) -> ([StallReport.HungAwaitDescription.ChainLink], String) {
        var links: [StallReport.HungAwaitDescription.ChainLink] = []
        var seen: Set<UInt64> = [state.id]
        var address = state.wait_address
        var id = state.wait_task_id
        while links.count < maxChain {
            if seen.contains(id) { return (links, "cycle") }
            seen.insert(id)
            var next = sw_task_state()
            let rc = sw_task_read(runtime, address, id, 1, &next)
            if rc == SW_TASK_READ_COMPLETED { return (links + [.init(id: id, state: "completed")], "completed") }
            guard rc == SW_TASK_READ_OK else { return (links, "unreadable") }
            let row = sw_tasks_find(address, id)
            var copy = sw_task_row()
            let known = row >= 0 && sw_tasks_copy_row(UInt32(row), &copy) == 1 && copy.task_id == id
            let suspended = Int32(next.state) != Int32(SW_TASK_RUNNING)
            let site = suspended ? AwaitSite(frames: names(frames(of: next))) : nil
            links.append(
                .init(
                    id: id, name: name(of: next), state: stateName(next.state),
                    waitKind: suspended ? waitKind(next.wait_kind).rawValue : nil,
                    suspendedMs: known && suspended && now > copy.since_ns
                        ? StallReport.milliseconds(now - copy.since_ns) : nil,
                    ageIsUpperBound: known && Int32(copy.flags) & Int32(SW_TASK_AGE_AT_MOST) != 0 ? true : nil,
                    awaitSite: site?.innermost, awaitingFunction: site?.awaitingFunction))
            guard Int32(next.wait_kind) == Int32(SW_WAIT_TASK), Int32(next.flags) & Int32(SW_TASK_TARGET_VALIDATED) != 0
            else { return (links, "root") }
            address = next.wait_address
            id = next.wait_task_id
        }
        return (links, "depth")
    }

    /// A child task's parent, when it waits on this child through its task group or an `async let`.
    private static func waiter(of state: sw_task_state, runtime: UnsafePointer<sw_task_runtime>)
        -> StallReport.HungAwaitDescription.TaskReference?
    {
        var parent = sw_task_state()
        guard sw_task_read(runtime, state.parent_address, 0, 1, &parent) == SW_TASK_READ_OK,
            Int32(parent.flags) & Int32(SW_TASK_STRUCTURED_WAIT) != 0
        else { return nil }
        let kind = Int32(parent.wait_kind)
        if kind == Int32(SW_WAIT_TASK_GROUP) {
            let children = withUnsafeBytes(of: parent.children) { raw in
                Array(
                    raw.bindMemory(to: UInt64.self).prefix(Int(min(parent.child_count, UInt32(SW_TASK_MAX_CHILDREN)))))
            }
            guard children.contains(state.address) else { return nil }
            return .init(id: parent.id, name: name(of: parent), via: "taskGroup")
        }
        guard kind == Int32(SW_WAIT_TASK), parent.wait_address == state.address else { return nil }
        return .init(id: parent.id, name: name(of: parent), via: "asyncLet")
    }
}
