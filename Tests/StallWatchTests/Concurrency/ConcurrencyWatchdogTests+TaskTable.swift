// The live task table the pool watchdog keeps from the job hook: suspended tasks by id, finished ones gone, a cap.
import CStallWatchConcurrency
import Foundation
import StallWatchTestSupport
import Synchronization
import Testing

@testable import StallWatch

extension ConcurrencyWatchdogTests {
    func tableConfiguration(directory: String, maxTasks: Int) -> StallWatchConfiguration {
        var config = configuration(directory: directory)
        config.heartbeat = true
        config.heartbeatDirectory = directory
        config.maxTasks = maxTasks
        return config
    }

    static func tableEntries() -> [TaskTableEntry] {
        ConcurrencyWatchdog.withTable { $0?.entries(now: sw_monotonic_ns()) ?? [] }
    }

    static func tableCounters() -> TaskTableCounters {
        ConcurrencyWatchdog.withTable { $0?.counters ?? TaskTableCounters() }
    }

    /// Waits without blocking a pool worker for long (the test is a pool job too).
    static func settle(_ condition: () -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + .seconds(20)
        while !condition(), ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(10)) }
        return condition()
    }

    @Test(.timeLimit(.minutes(1)))
    func suspendedTasksAreTabledByIdWithTheirSuspensionTimeAndLeaveOnceFinished() async throws {
        let directory = Fixtures.temporaryDirectory("task-table")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try ConcurrencyWatchdog.enable(configuration: tableConfiguration(directory: directory, maxTasks: 1024)) { _ in
        }
        let published = TaskTableRegion.path(directory: directory, pid: getpid())
        #expect(FileManager.default.fileExists(atPath: published))

        let before = sw_monotonic_ns()
        let tasks = SuspendedTasks(count: 5)
        #expect(await Self.settle { tasks.allWaiting })
        let ids = Set(tasks.ids)
        #expect(ids.count == 5 && !ids.contains(0))
        #expect(
            await Self.settle {
                Self.tableEntries().filter { ids.contains($0.id) && $0.state == .suspended }.count == 5
            })
        let tabled = sw_monotonic_ns()
        for entry in Self.tableEntries() where ids.contains(entry.id) {
            // One job each, ended when the task suspended: after the tasks' creation and before the table showed it
            // (the job end's clock is CLOCK_MONOTONIC_COARSE: up to one tick, ~4 ms, early).
            #expect(entry.runs == 1)
            #expect(entry.sinceNanos + 10_000_000 >= before && entry.sinceNanos <= tabled)
            #expect(entry.firstSeenNanos <= entry.lastEndNanos)
            #expect(!entry.isChild && !entry.ageIsUpperBound)
        }
        #expect(Self.tableCounters().tasksSeen >= 5)

        tasks.resumeAll()
        #expect(await Self.settle { tasks.finishedCount == 5 })
        #expect(await Self.settle { !Self.tableEntries().contains { ids.contains($0.id) } })
        ConcurrencyWatchdog.disable()
        #expect(!FileManager.default.fileExists(atPath: published))
    }

    @Test(.timeLimit(.minutes(1)))
    func aFullTableCountsTheTasksItCannotHold() async throws {
        let directory = Fixtures.temporaryDirectory("task-table-full")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try ConcurrencyWatchdog.enable(configuration: tableConfiguration(directory: directory, maxTasks: 4)) { _ in }
        defer { ConcurrencyWatchdog.disable() }

        let tasks = SuspendedTasks(count: 12)
        #expect(await Self.settle { tasks.allWaiting })
        // Twelve suspended tasks, four rows: at least eight are counted, not tabled.
        #expect(await Self.settle { Self.tableCounters().tasksDropped >= 8 })
        let full = Self.tableCounters()
        #expect(full.capacity == 4 && full.live <= 4)
        #expect(Self.tableEntries().count <= 4)
        tasks.resumeAll()
        #expect(await Self.settle { tasks.finishedCount == 12 })
    }

    /// Tasks counted as they finish, from whichever worker.
    final class Finished: Sendable {
        let count = Atomic<Int>(0)
        func add() { count.add(1, ordering: .relaxed) }
        var value: Int { count.load(ordering: .relaxed) }
    }

    /// A task whose first job completes it never suspended, so no row can ever hold it: its worker keeps its job end
    /// to itself. Twenty thousand such tasks add to what the watchdog drains no more than whatever else runs
    /// meanwhile, while two thousand tasks that yield once add two job ends each.
    @Test(.timeLimit(.minutes(1)))
    func tasksCompletedInTheirFirstJobLeaveNoJobEndsToDrain() async throws {
        let directory = Fixtures.temporaryDirectory("task-table-short")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try ConcurrencyWatchdog.enable(configuration: tableConfiguration(directory: directory, maxTasks: 1024)) { _ in
        }
        defer { ConcurrencyWatchdog.disable() }
        func jobEnds() -> UInt64 {
            let counters = Self.tableCounters()
            return counters.eventsApplied + counters.eventsDropped
        }
        /// Job ends drained or lost once a drain that began after the call is over.
        func jobEndsAfterADrain() async -> UInt64 {
            let mark = sw_monotonic_ns()
            #expect(await Self.settle { Self.tableCounters().publishedNanos > mark })
            return jobEnds()
        }
        let (short, yielding) = (20_000, 2_000)
        let finished = Finished()
        let before = await jobEndsAfterADrain()
        for _ in 0..<short { Task.detached { finished.add() } }
        #expect(await Self.settle { finished.value == short })
        for _ in 0..<yielding {
            Task.detached {
                await Task.yield()
                finished.add()
            }
        }
        #expect(await Self.settle { finished.value == short + yielding })
        #expect(await Self.settle { jobEnds() - before >= UInt64(2 * yielding) })
        let added = await jobEndsAfterADrain() - before
        // The yielding tasks' 4,000, the test's own polling and whatever other suites ran: far fewer than 20,000.
        #expect(
            added < UInt64(2 * yielding + short / 4),
            "\(added) job ends drained for \(short) tasks that never suspended and \(yielding) that yielded once")
    }

    /// The index by task address starts small and grows as rows are taken: every one of thousands of suspended
    /// tasks is found in its row after it grew several times, and every one leaves when it finishes (its slot
    /// freed from the grown index, nothing found twice or left behind). Their 6,000 job ends fit in one worker's
    /// ring (8,192), so a watchdog held off its CPU by a loaded machine loses none of them.
    @Test(.timeLimit(.minutes(1)))
    func thousandsOfSuspendedTasksAreEachTabledOnceAndAllLeave() async throws {
        let directory = Fixtures.temporaryDirectory("task-table-many")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try ConcurrencyWatchdog.enable(configuration: tableConfiguration(directory: directory, maxTasks: 8192)) { _ in
        }
        defer { ConcurrencyWatchdog.disable() }

        let tasks = SuspendedTasks(count: 3000)
        #expect(await Self.settle { tasks.allWaiting })
        let ids = Set(tasks.ids)
        #expect(ids.count == 3000)
        func tabled() -> [UInt64] {
            Self.tableEntries().filter { ids.contains($0.id) && $0.state == .suspended }.map(\.id)
        }
        #expect(await Self.settle { tabled().count == 3000 }, "\(tabled().count) of 3000 tabled")
        #expect(Set(tabled()).count == tabled().count)
        #expect(Self.tableCounters().tasksDropped == 0)

        tasks.resumeAll()
        #expect(await Self.settle { tasks.finishedCount == 3000 })
        #expect(
            await Self.settle { !Self.tableEntries().contains { ids.contains($0.id) } },
            "\(Self.tableEntries().filter { ids.contains($0.id) }.count) rows left")
        // Fewer job ends than one worker's ring holds: none may be lost, however late the watchdog drains.
        #expect(Self.tableCounters().eventsDropped == 0)
    }
}
