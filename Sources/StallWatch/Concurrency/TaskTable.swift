// TaskTable: the live table of Swift tasks the pool watchdog keeps from the job hook, set up and read in-process.
import CStallWatchConcurrency
import CStallWatchCore

#if canImport(Glibc)
    import Glibc
#endif

/// The task table of this process: every task seen running on the global executor and not yet finished, with when
/// it was first seen, its last job (start and end), its runs, and its state after that job (see `sw_tasks.h`).
///
/// Set up by ``ConcurrencyWatchdog/enable(configuration:onEvent:)`` before jobs are routed, torn down by `disable`
/// after the watchdog thread is joined. Only the watchdog thread writes it; ``entries(now:)`` reads it from any
/// thread (rows are copied and checked against their sequence word).
final class TaskTable: @unchecked Sendable {  // The region is immutable; the C table has one writer.
    let region: TaskTableRegion
    let capacity: Int

    /// Sets up the table for `configuration.maxTasks` tasks, published in the heartbeat directory when the heartbeat
    /// is on (a failure to publish leaves the table private and is returned in `publishError`).
    init(configuration: StallWatchConfiguration) throws(StallWatchError) {
        capacity = configuration.maxTasks
        let size = Int(sw_tasks_region_size(UInt32(capacity)))
        let pid = getpid()
        var published: TaskTableRegion?
        if configuration.heartbeat {
            do throws(StallWatchError) {
                published = try TaskTableRegion(
                    directory: configuration.heartbeatDirectoryPath, size: size, pid: pid)
            } catch {
                publishError = error
            }
        }
        if let published {
            region = published
        } else {
            region = try TaskTableRegion(anonymousSize: size)
        }
        let ticks = HeartbeatPublisher.startTimeTicks(pid: pid) ?? 0
        guard sw_tasks_setup(region.base, UInt64(size), UInt32(capacity), pid, ticks) == 0 else {
            throw StallWatchError(
                .unsupported,
                "the task table cannot be set up on this Concurrency runtime (layout version "
                    + "\(sw_pool_runtime_layout_version()))")
        }
        if region.path != nil {
            do throws(StallWatchError) {
                try region.publish()
            } catch {
                publishError = error
            }
        }
    }

    /// Why the table is not published for a sidecar, when it could not be.
    private(set) var publishError: StallWatchError?

    /// Stops the per-job events and frees the table's bookkeeping; the file is removed. After the watchdog thread
    /// is joined (it is the table's writer).
    func tearDown() {
        sw_tasks_enable(0)
        region.withdraw()
        sw_tasks_teardown()
    }

    /// The published file, when there is one.
    var path: String? { region.path }

    /// Every task of the table now (copied row by row; a row changing too fast to copy is left out).
    func entries(now: UInt64) -> [TaskTableEntry] {
        guard let header = sw_tasks_header_pointer() else { return [] }
        let highWater = min(Int(header.pointee.high_water), capacity)
        var result: [TaskTableEntry] = []
        var row = sw_task_row()
        for index in 0..<highWater where sw_tasks_copy_row(UInt32(index), &row) == 1 {
            let entry = TaskTableEntry(row: row, now: now) { chain in
                var copy = sw_task_chain()
                return sw_tasks_copy_chain(chain, &copy) == 1 ? copy : nil
            }
            if let entry { result.append(entry) }
        }
        return result
    }

    /// The header's counters now.
    var counters: TaskTableCounters {
        guard let header = sw_tasks_header_pointer() else { return TaskTableCounters() }
        return TaskTableCounters(header: header.pointee)
    }
}

/// What the table could not hold, and how full it is.
package struct TaskTableCounters: Sendable, Equatable {
    package var capacity = 0
    package var live = 0
    package var tasksSeen: UInt64 = 0
    /// Tasks not given a row: the table was full (`maxTasks`).
    package var tasksDropped: UInt64 = 0
    /// Job ends lost: a worker's ring filled before the watchdog drained it.
    package var eventsDropped: UInt64 = 0
    /// Job ends drained into the rows (a task whose first job completed it leaves none).
    package var eventsApplied: UInt64 = 0
    /// CLOCK_MONOTONIC at the start of the watchdog's latest drain.
    package var publishedNanos: UInt64 = 0

    package init() {}

    package init(header: sw_tasks_header) {
        capacity = Int(header.capacity)
        live = Int(header.live)
        tasksSeen = header.tasks_seen
        tasksDropped = header.tasks_dropped
        eventsDropped = header.events_dropped
        eventsApplied = header.events_applied
        publishedNanos = header.published_ns
    }
}
