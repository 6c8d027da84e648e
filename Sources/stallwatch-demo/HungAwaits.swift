// The demo's hung awaits: tasks that wait forever among many that cycle, with every pool thread idle.
import Dispatch
import Foundation
import StallWatch
import Synchronization

/// `stall --loop concurrency --kind hung-await`: 1,000 tasks (`--cycling-tasks`) cycle through `Task.sleep(for: .milliseconds(10))`
/// while three wait forever: one on a `CheckedContinuation` nobody resumes, one on the first task's value, and a
/// task group's child on another such continuation (its parent waits on the group). Each stuck task prints one
/// JSON line with its task id once it is suspended (the group's parent too, as `groupParent`).
enum HungAwaits {
    /// Continuations nobody resumes while the demo runs.
    static let neverResumed = Mutex<[CheckedContinuation<Void, Never>]>([])

    static func run(configuration: StallWatchConfiguration, durationMs: Int, cycling: Int) -> Never {
        var configuration = configuration
        // The task table is what `stallwatch tasks` reads: on unless the configuration sized it.
        if configuration.maxTasks == 0 { configuration.maxTasks = 65_536 }
        do {
            try ConcurrencyWatchdog.enable(configuration: configuration) { EventPrinter.print($0) }
        } catch {
            fail(error.message, code: 1)
        }
        for _ in 0..<cycling {
            Task.detached {
                while true { try? await Task.sleep(for: .milliseconds(10)) }
            }
        }
        let first = Task.detached(name: "awaitReplyThatNeverComes") { await awaitReplyThatNeverComes() }
        Task.detached(name: "awaitFirstTask") { await awaitFirstTask(first) }
        Task.detached(name: "groupParent") {
            announce("groupParent")
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await groupChildWaits() }
            }
        }
        Thread.sleep(forTimeInterval: Double(durationMs) / 1000)
        ConcurrencyWatchdog.disable()
        exit(0)
    }

    /// One JSON line naming the calling task, printed just before it suspends for good.
    static func announce(_ function: String) {
        let id = ConcurrencyWatchdog.currentTaskID ?? 0
        let line = "{\"event\":\"stuckTask\",\"function\":\"\(function)\",\"taskID\":\(id)}\n"
        FileHandle.standardOutput.write(Data(line.utf8))
    }

    @inline(never)
    static func awaitReplyThatNeverComes() async {
        await withCheckedContinuation { continuation in
            neverResumed.withLock { $0.append(continuation) }
            announce("awaitReplyThatNeverComes")
        }
    }

    @inline(never)
    static func awaitFirstTask(_ first: Task<Void, Never>) async {
        announce("awaitFirstTask")
        await first.value
    }

    @inline(never)
    static func groupChildWaits() async {
        await withCheckedContinuation { continuation in
            neverResumed.withLock { $0.append(continuation) }
            announce("groupChildWaits")
        }
    }
}
