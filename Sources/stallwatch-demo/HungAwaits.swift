// The demo's hung awaits: tasks that wait forever among many that cycle, with every pool thread idle.
import Dispatch
import Foundation
import StallWatch
import Synchronization

/// `stall --loop concurrency --kind hung-await`: 1,000 tasks (`--cycling-tasks`) cycle through
/// `Task.sleep(for: .milliseconds(10))` while three wait forever: one on a `CheckedContinuation` nobody resumes, one
/// on the first task's value, and a task group's child on another such continuation (its parent waits on the
/// group). Beside them, waits that are not hung: an `AsyncStream` consumer waiting for its next element and a
/// `Task.sleep(for: .seconds(30))`; with `--resume-after-ms N`, a fourth task awaits a continuation resumed after
/// N ms. Each stuck task prints one JSON line with its task id once it is suspended (the group's parent, the
/// consumer and the sleeper too), the pool watchdog one line per event (a hung-await report's `began` and
/// `ended`). The demo exits 0 once the three are reported (and the resumed task's report ended) and
/// `--duration-ms` has passed; 1 if they are not within ten thresholds of that.
enum HungAwaits {
    /// Continuations nobody resumes while the demo runs.
    static let neverResumed = Mutex<[CheckedContinuation<Void, Never>]>([])
    /// The task ids announced, by function, and the reports seen.
    static let progress = Mutex<Progress>(Progress())

    struct Progress {
        var ids: [String: UInt64] = [:]
        var reported: Set<UInt64> = []
        var ended: Set<UInt64> = []
    }

    static let hung = ["awaitReplyThatNeverComes", "awaitFirstTask", "groupChildWaits"]
    static let resumed = "awaitReplyThatComesLate"

    static func run(configuration: StallWatchConfiguration, durationMs: Int, cycling: Int, resumeAfterMs: Int?)
        -> Never
    {
        var configuration = configuration
        // The task table is what `stallwatch tasks` reads and what hung awaits are found in: on unless the
        // configuration sized it.
        if configuration.maxTasks == 0 { configuration.maxTasks = 65_536 }
        let done = DispatchSemaphore(value: 0)
        let expected = hung.count + (resumeAfterMs == nil ? 0 : 1)
        do {
            try ConcurrencyWatchdog.enable(configuration: configuration) { event in
                EventPrinter.print(event)
                if observe(event, expected: expected, resumed: resumeAfterMs != nil) { done.signal() }
            }
        } catch {
            fail(error.message, code: 1)
        }
        for _ in 0..<cycling {
            Task.detached {
                while !Task.isCancelled { try? await Task.sleep(for: .milliseconds(10)) }
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
        let (stream, feed) = AsyncStream.makeStream(of: Int.self)
        Task.detached(name: "streamConsumer") {
            announce("streamConsumer")
            for await _ in stream {}
        }
        Task.detached(name: "longSleeper") {
            announce("longSleeper")
            try? await Task.sleep(for: .seconds(30))
        }
        if let resumeAfterMs {
            Task.detached(name: resumed) { await awaitReplyThatComesLate(afterMs: resumeAfterMs) }
        }
        let threshold = max(configuration.hungAwaitThresholdMs, 1)
        let start = DispatchTime.now()
        let allIn = done.wait(timeout: start + .milliseconds(durationMs + 10 * threshold)) == .success
        // The quiet part of the run: the cycling tasks, the consumer and the sleeper go on until --duration-ms.
        let left = (start + .milliseconds(durationMs)).uptimeNanoseconds
        let now = DispatchTime.now().uptimeNanoseconds
        if left > now { Thread.sleep(forTimeInterval: Double(left - now) / 1e9) }
        feed.finish()
        ConcurrencyWatchdog.disable()
        guard allIn else { fail("not every stuck task was reported as a hung await", code: 1) }
        exit(0)
    }

    /// Counts the hung-await reports of the announced tasks; true once every expected one is in.
    static func observe(_ event: StallEvent, expected: Int, resumed: Bool) -> Bool {
        progress.withLock { progress in
            switch event {
            case .began(let report) where report.cause?.kind == .hungAwait:
                if let id = report.task?.id { progress.reported.insert(id) }
            case .ended(let report) where report.cause?.kind == .hungAwait && report.status == .ended:
                if let id = report.task?.id { progress.ended.insert(id) }
            default: return false
            }
            let watched = (hung + (resumed ? [Self.resumed] : [])).compactMap { progress.ids[$0] }
            guard watched.count == expected, watched.allSatisfy(progress.reported.contains) else { return false }
            return !resumed || progress.ids[Self.resumed].map(progress.ended.contains) == true
        }
    }

    /// One JSON line naming the calling task and the wall-clock time (seconds since 1970), printed just before it
    /// suspends: the truth its report's age is checked against.
    static func announce(_ function: String) {
        let id = ConcurrencyWatchdog.currentTaskID ?? 0
        progress.withLock { $0.ids[function] = id }
        let at = String(format: "%.6f", Date().timeIntervalSince1970)
        let line = "{\"event\":\"stuckTask\",\"function\":\"\(function)\",\"taskID\":\(id),\"at\":\(at)}\n"
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

    @inline(never)
    static func awaitReplyThatComesLate(afterMs: Int) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            announce(resumed)
            DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(afterMs)) { continuation.resume() }
        }
    }
}
