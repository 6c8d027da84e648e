// `stallwatch tasks`: the task table of a live process read from its published file, filtered by --hung.
import CStallWatchCore
import Foundation
import StallWatchTestSupport
import Testing

@testable import StallWatch
@testable import StallWatchCommands
@testable import StallWatchSidecar

#if canImport(Glibc)
    import Glibc
#endif

@Suite(.offPool) struct TasksCommandTests {
    struct Listing: Decodable {
        struct Task: Decodable {
            var id: UInt64
            var state: String
            var ageMs: Double
            var runs: Int
        }
        var pid: Int32
        var capacity: Int
        var tasks: [Task]
    }

    static func listing(_ arguments: [String]) -> Listing? {
        let (code, output) = CapturedConsole.run(["tasks"] + arguments)
        guard code == .ok else { return nil }
        return try? JSONDecoder().decode(Listing.self, from: Data(output.standardOutput.utf8))
    }

    struct StuckTask: Decodable {
        var function: String
        var taskID: UInt64
    }

    /// The demo's waiting tasks (three hung waits, the group's parent, an `AsyncStream` consumer and a 30 s
    /// `Task.sleep`) among 50 cycling through `Task.sleep(10 ms)`, before its hung-await detector looked at them:
    /// `--hung` lists exactly those, read from the file the demo publishes, each with its age by the demo's
    /// announcement (printed just before it suspended), and no cycling task.
    /// Alone it takes 2 s; beside the suites that block the pool's and dispatch's threads for seconds, the demo's
    /// start and the reading of its output can take far longer.
    @Test(.timeLimit(.minutes(3)))
    func hungListsExactlyTheTasksSuspendedThatLongAmongManyCyclingOnes() throws {
        let directory = Fixtures.temporaryDirectory("tasks-cli")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let demo = try Spawned(
            Fixtures.executable("stallwatch-demo"),
            // 50 cycling tasks, not the demo's 1,000: 5,000 wake-ups a second are enough to tell them apart, and
            // the timing-sensitive suites running beside this one keep their CPUs.
            [
                "stall", "--loop", "concurrency", "--kind", "hung-await", "--duration-ms", "30000", "--cycling-tasks",
                "50",
            ],
            environment: ["STALLWATCH_HEARTBEAT_DIRECTORY": directory, "STALLWATCH_REPORT_DIRECTORY": directory])
        defer {
            kill(demo.pid, SIGKILL)
            demo.wait(timeout: .seconds(10))
        }
        let functions = [
            "awaitReplyThatNeverComes", "awaitFirstTask", "groupChildWaits", "groupParent", "streamConsumer",
            "longSleeper",
        ]
        func announcements() -> [StuckTask] {
            demo.stdout.split(separator: "\n").compactMap {
                try? JSONDecoder().decode(StuckTask.self, from: Data($0.utf8))
            }
        }
        #expect(pollUntil(timeout: .seconds(20)) { announcements().count >= functions.count }, "\(demo.stderr)")
        let announced = ContinuousClock.now
        let stuck = announcements()
        #expect(Set(stuck.map(\.function)) == Set(functions))
        let ids = Set(stuck.map(\.taskID))
        #expect(ids.count == functions.count && !ids.contains(0))
        let base = ["-p", "\(demo.pid)", "--heartbeat-dir", directory, "--json"]
        // The cycling tasks are never suspended 1.5 s; the stuck ones are, from 1.5 s after their announcement on —
        // later for one that a loaded machine kept from its suspension after it announced it: the listing is read
        // again until it names the stuck tasks (a cycling task listed, or a stuck one never, fails).
        #expect(pollUntil(timeout: .seconds(2)) { ContinuousClock.now - announced >= .milliseconds(1500) })
        var listed: Listing?
        var truthMs = 0.0
        let complete = pollUntil(timeout: .seconds(5), every: .milliseconds(50)) {
            listed = Self.listing(base + ["--hung", "1.5s"])
            truthMs = Double((ContinuousClock.now - announced) / .milliseconds(1))
            return listed.map { Set($0.tasks.map(\.id)) == ids } ?? false
        }
        let last = try #require(listed)
        #expect(complete, "listed \(last.tasks.map(\.id)), stuck \(ids.sorted())")
        #expect(last.pid == demo.pid)
        for task in last.tasks {
            #expect(task.state == "suspended")
            // Announced just before suspending; read after `announced` was taken: the age is at least the time since
            // the announcement and not more than that plus the wait for the first line (±1 s, the bound).
            #expect(abs(task.ageMs - truthMs) <= 1000, "task \(task.id): \(task.ageMs) ms, truth \(truthMs) ms")
        }
        let all = try #require(Self.listing(base))
        #expect(all.tasks.count > 50, "the cycling tasks are tabled too")
        #expect(Self.listing(base + ["--hung", "1h"])?.tasks.isEmpty == true)
    }

    @Test func aMalformedDurationIsAUsageError() {
        let (code, output) = CapturedConsole.run(["tasks", "-p", "1", "--hung", "soon"])
        #expect(code == .usage)
        #expect(output.standardError.contains("--hung soon"))
        #expect(TasksCommand.duration("500ms") == 500_000_000)
        #expect(TasksCommand.duration("5s") == 5_000_000_000)
        #expect(TasksCommand.duration("2m") == 120_000_000_000)
        #expect(TasksCommand.duration("1.5") == 1_500_000_000)
        #expect(TasksCommand.duration("-1s") == nil)
    }

    @Test func aProcessWithoutATableIsAnErrorNamingTheFile() throws {
        let directory = Fixtures.temporaryDirectory("tasks-cli-none")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let (code, output) = CapturedConsole.run(["tasks", "-p", "\(getpid())", "--heartbeat-dir", directory])
        #expect(code != .ok)
        #expect(output.standardError.contains(TaskTableRegion.path(directory: directory, pid: getpid())))
        #expect(output.standardError.contains("publishes no task table"))
    }

    @Test func theTextViewKeepsNamesPrintable() {
        var row = sw_task_row()
        row.task_id = 7
        row.state = UInt8(SW_TASK_SUSPENDED)
        row.first_seen_ns = 1
        row.last_start_ns = 2
        row.last_end_ns = 3
        row.since_ns = 3
        withUnsafeMutableBytes(of: &row.name) { raw in
            for (index, byte) in "a\u{1b}[2Jb".utf8.enumerated() { raw[index] = byte }
        }
        let entry = TaskTableEntry(row: row, now: 5_000_000_003) { _ in nil }
        let snapshot = TaskTableSnapshot(
            pid: 1, readNanos: 5_000_000_003, publishedNanos: 5_000_000_000, counters: TaskTableCounters(),
            running: [], tasks: [entry].compactMap { $0 }, rowsSkipped: 0)
        let lines = TasksCommand.lines(snapshot, tasks: snapshot.tasks)
        #expect(lines.count == 3)
        #expect(lines[2].hasPrefix("7 ") && lines[2].contains("suspended") && lines[2].contains("5.0 s"))
        #expect(!lines.joined().unicodeScalars.contains { $0.value == 0x1b })
    }
}
