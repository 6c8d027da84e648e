// TasksCommand: `stallwatch tasks --pid PID [--hung DURATION] [--json]`, the task table a process publishes.
import Foundation
import StallWatch
import StallWatchSidecar

/// The function behind `stallwatch tasks` (see ``StallWatchCLI/subcommands``): one read of the task table the
/// process publishes next to its heartbeat (no ptrace, the process is not stopped), printed as a table on a terminal
/// and as JSON with `--json` or when standard output is not a terminal.
enum TasksCommand {
    static let options: Set<String> = ["--pid", "--hung", "--heartbeat-dir"]

    static func run(_ invocation: Invocation) throws -> ExitCode {
        let args = invocation.arguments
        guard let pidText = args.options["--pid"] else { throw CommandError.usage("tasks: --pid PID is required") }
        let pid = Int32(try Arguments.number(pidText, "--pid", 1...Int(Int32.max)))
        var hungNanos: UInt64?
        if let text = args.options["--hung"] {
            guard let nanos = duration(text) else {
                throw CommandError.usage("tasks: --hung \(text): expected a duration (500ms, 5s, 2m, 1h)")
            }
            hungNanos = nanos
        }
        let configuration = try args.configuration(environment: invocation.environment)
        let directory = args.options["--heartbeat-dir"] ?? configuration.heartbeatDirectoryPath
        let snapshot = try TaskTableReader.read(pid: pid, directory: directory)
        let now = snapshot.readNanos
        var tasks = snapshot.tasks
        if let hungNanos {
            // Suspended for at least that long. A task whose state after its last job could not be read (an
            // `async let` child) is not known to be suspended, and is left out; so are the tasks the process's
            // hung-await detector read and left alone: an exempt await site (a sleep, a stream's next element), or
            // a wait on the task's own children (the child that does not finish is the one listed).
            tasks = tasks.filter {
                $0.state == .suspended && $0.age(at: now) >= hungNanos && !$0.isExempt && !$0.waitsOnChildren
            }
        }
        tasks.sort { ($0.age(at: now), $1.id) > ($1.age(at: now), $0.id) }
        let console = invocation.console
        if args.has("--json") || !console.outputIsTerminal {
            console.output(try json(snapshot, tasks: tasks))
        } else {
            lines(snapshot, tasks: tasks).forEach { console.print($0) }
        }
        return .ok
    }

    /// `500ms`, `5s`, `2m`, `1h` (a number alone is seconds) in nanoseconds; nil when malformed.
    static func duration(_ text: String) -> UInt64? {
        let units: [(String, Double)] = [("ms", 1e6), ("s", 1e9), ("m", 60e9), ("h", 3600e9)]
        var number = Substring(text)
        var scale = 1e9
        if let unit = units.first(where: { text.hasSuffix($0.0) }) {
            number = text.dropLast(unit.0.count)
            scale = unit.1
        }
        guard let value = Double(number), value >= 0, value * scale < 1e18 else { return nil }
        return UInt64(value * scale)
    }

    static func lines(_ snapshot: TaskTableSnapshot, tasks: [TaskTableEntry]) -> [String] {
        let now = snapshot.readNanos
        let counters = snapshot.counters
        var header =
            "pid \(snapshot.pid): \(counters.live) tasks in the table (capacity \(counters.capacity), "
            + "\(counters.tasksSeen) seen, \(counters.tasksDropped) not tabled, \(counters.eventsDropped) job ends lost)"
        if snapshot.publishedNanos == 0 {
            header += ", not brought up to date yet"
        } else {
            header += ", up to date \(seconds(now &- min(now, snapshot.publishedNanos))) ago"
        }
        var result = [header]
        if snapshot.rowsSkipped > 0 { result.append("\(snapshot.rowsSkipped) rows changing or invalid, left out") }
        result.append(
            pad("ID", 12) + pad("STATE", 11) + pad("FOR", 10) + pad("SEEN", 10) + pad("RUNS", 8) + pad("THREAD", 9)
                + "NOTES")
        for task in tasks {
            var notes: [String] = []
            if snapshot.running.contains(task.id) { notes.append("on a worker now") }
            if task.isAsyncLet {
                notes.append("async let")
            } else if task.isGroupChild {
                notes.append("group child")
            } else if task.isChild {
                notes.append("child")
            }
            if let name = task.name { notes.append("name \(name)") }
            if task.isHung { notes.append("hung await") }
            if task.isExempt { notes.append("exempt") }
            if task.waitsOnChildren { notes.append("waits on its children") }
            if let kind = task.waitKind {
                notes.append("waits on \(kind.rawValue)" + (task.awaitedTaskID.map { " \($0)" } ?? ""))
            }
            let age = (task.ageIsUpperBound ? "≤" : "") + seconds(task.age(at: now))
            result.append(
                pad("\(task.id)", 12) + pad(task.state.rawValue, 11) + pad(age, 10)
                    + pad(seconds(now &- min(now, task.firstSeenNanos)), 10) + pad("\(task.runs)", 8)
                    + pad("\(task.threadID)", 9)
                    + notes.joined(separator: ", "))
        }
        return result
    }

    private static func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text + " " : text + String(repeating: " ", count: width - text.count)
    }

    private static func seconds(_ nanos: UInt64) -> String {
        String(format: "%.1f s", Double(nanos) / 1e9)
    }

    /// The JSON form: stable keys, ages in milliseconds relative to the read.
    struct Document: Encodable {
        struct Task: Encodable {
            var id: UInt64
            var state: String
            var ageMs: Double
            var ageIsUpperBound: Bool
            var firstSeenAgoMs: Double
            var runs: Int
            var threadID: Int32
            var priority: Int
            var running: Bool
            var child: Bool
            var groupChild: Bool
            var asyncLet: Bool
            var name: String?
            /// What the hung-await detector found it waits on, once it read the task (absent before).
            var waitKind: String?
            var awaitedTaskID: UInt64?
            var hungAwait: Bool
            var exempt: Bool
            var waitsOnChildren: Bool
        }
        var pid: Int32
        var capacity: Int
        var live: Int
        var tasksSeen: UInt64
        var tasksDropped: UInt64
        var eventsDropped: UInt64
        var publishedAgoMs: Double?
        var rowsSkipped: Int
        var tasks: [Task]
    }

    static func json(_ snapshot: TaskTableSnapshot, tasks: [TaskTableEntry]) throws -> String {
        let now = snapshot.readNanos
        func ms(_ nanos: UInt64) -> Double { (Double(nanos) / 1e4).rounded() / 100 }
        let document = Document(
            pid: snapshot.pid, capacity: snapshot.counters.capacity, live: snapshot.counters.live,
            tasksSeen: snapshot.counters.tasksSeen, tasksDropped: snapshot.counters.tasksDropped,
            eventsDropped: snapshot.counters.eventsDropped,
            publishedAgoMs: snapshot.publishedNanos == 0 ? nil : ms(now &- min(now, snapshot.publishedNanos)),
            rowsSkipped: snapshot.rowsSkipped,
            tasks: tasks.map { task in
                Document.Task(
                    id: task.id, state: task.state.rawValue, ageMs: ms(task.age(at: now)),
                    ageIsUpperBound: task.ageIsUpperBound, firstSeenAgoMs: ms(now &- min(now, task.firstSeenNanos)),
                    runs: task.runs, threadID: task.threadID, priority: task.priority,
                    running: snapshot.running.contains(task.id), child: task.isChild, groupChild: task.isGroupChild,
                    asyncLet: task.isAsyncLet, name: task.name, waitKind: task.waitKind?.rawValue,
                    awaitedTaskID: task.awaitedTaskID, hungAwait: task.isHung, exempt: task.isExempt,
                    waitsOnChildren: task.waitsOnChildren)
            })
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return String(decoding: try encoder.encode(document), as: UTF8.self)
    }
}
