// HungAwaitWatcher: finds Swift tasks suspended past the threshold in the task table, on the pool watchdog's thread.
import CStallWatchConcurrency
import CStallWatchCore

/// The hung-await detector, run by ``PoolWatcher`` after each drain of the task table.
///
/// It costs nothing between its deadlines. A task suspended at `s` cannot be hung before `s + threshold`, so the
/// watcher scans the table only when the earliest such moment of the rows it saw comes (and one threshold after
/// jobs ran, for the tasks suspended since): a scan reads the rows (no task memory), and reads the memory of a
/// task only once its suspension reached the threshold — its wait, async backtrace and name, checked
/// (`sw_task_read.h`). A task waiting on its own children (a task group, an `async let`) or at an exempt await site
/// is left alone for that suspension; any other is a hung await and reported. While reports are open it looks at
/// their tasks every second: a task that ran again (its row shows a later job) or completed ends its report.
final class HungAwaitWatcher {
    private let thresholdNanos: UInt64
    private let exemptions: AwaitExemptions
    private let symbolicator: Symbolicator
    private let reporter: HungAwaitReporter
    private var runtime: sw_task_runtime

    /// One suspension of a task: its row's task and since when it has been suspended.
    private struct Suspension: Equatable {
        var taskID: UInt64
        var since: UInt64
    }

    /// Suspensions read and left alone (exempt, structured): not read again until the task runs again.
    private var settled: [UInt32: Suspension] = [:]
    /// Suspensions reported as hung, with where the task resumes (a change: it ran unseen, on an actor).
    private var hung: [UInt32: (suspension: Suspension, resumeContext: UInt64)] = [:]
    /// The exemption verdict of each backtrace seen (resume points → the pattern that matched, or nil).
    private var verdicts: [[UInt64]: String?] = [:]
    private var nextScan: UInt64?
    private var nextHungCheck: UInt64 = 0

    /// How often reported tasks are looked at while their reports are open.
    static let hungCheckNanos: UInt64 = 1_000_000_000
    /// A task that changed while it was read is read again this much later.
    static let retryNanos: UInt64 = 50_000_000

    /// A watcher for `configuration.hungAwaitThresholdMs`, nil when it is 0 or the runtime exports no task layout.
    init?(
        configuration: StallWatchConfiguration, symbolicator: Symbolicator,
        emit: @escaping @Sendable (StallEvent) -> Void
    ) {
        guard configuration.hungAwaitThresholdMs > 0 else { return nil }
        var runtime = sw_task_runtime()
        guard sw_tasks_runtime(&runtime) == 0 else { return nil }
        self.runtime = runtime
        thresholdNanos = UInt64(configuration.hungAwaitThresholdMs) * 1_000_000
        exemptions = AwaitExemptions(setting: configuration.hungAwaitExemptions)
        self.symbolicator = symbolicator
        reporter = HungAwaitReporter(configuration: configuration, thresholdNanos: thresholdNanos, emit: emit)
    }

    /// Acts on what is due at `now` (the table just drained); returns the next deadline (nil: none, park freely).
    /// `jobsRan`: jobs ran since the last call, so tasks may have suspended that no scan has seen.
    func look(now: UInt64, jobsRan: Bool) -> UInt64? {
        if jobsRan, nextScan == nil { nextScan = now + thresholdNanos }
        if let due = nextScan, due <= now { scan(now: now) }
        if !hung.isEmpty, now >= nextHungCheck {
            checkHung(now: now)
            nextHungCheck = now + Self.hungCheckNanos
        }
        var deadline = nextScan
        if !hung.isEmpty { deadline = min(deadline ?? .max, nextHungCheck) }
        return deadline
    }

    /// The watchdog stops: open reports are written `unrecovered`.
    func stop(now: UInt64) { reporter.stop(now: now) }

    // MARK: Scanning

    private func scan(now: UInt64) {
        guard let header = sw_tasks_header_pointer() else { return }
        let highWater = min(header.pointee.high_water, header.pointee.capacity)
        var earliest = UInt64.max
        var copy = sw_task_row()
        for row in 0..<highWater {
            guard sw_tasks_copy_row(row, &copy) == 1 else { continue }
            let state = Int32(copy.state)
            guard state == Int32(SW_TASK_SUSPENDED) || state == Int32(SW_TASK_UNKNOWN) else {
                settled[row] = nil
                continue
            }
            let suspension = Suspension(taskID: copy.task_id, since: copy.since_ns)
            if hung[row]?.suspension == suspension { continue }
            if let known = settled[row] {
                if known == suspension { continue }
                settled[row] = nil
            }
            let due = copy.since_ns &+ thresholdNanos
            if due > now {
                earliest = min(earliest, due)
            } else if let retry = examine(row: row, copy: copy, suspension: suspension, now: now) {
                earliest = min(earliest, retry)
            }
        }
        // Never sooner than a sixteenth of the threshold: suspensions ending just before they are due cannot make
        // the watcher scan back to back.
        nextScan = earliest == .max ? nil : max(earliest, now + thresholdNanos / 16)
    }

    /// Reads the task of a row suspended past the threshold; returns when to look again, if it must be.
    private func examine(row: UInt32, copy: sw_task_row, suspension: Suspension, now: UInt64) -> UInt64? {
        let address = sw_tasks_address(row)
        guard address != 0 else { return nil }
        var state = sw_task_state()
        let rc = sw_task_read(&runtime, address, copy.task_id, 1, &state)
        if rc == SW_TASK_READ_CHANGING { return now + Self.retryNanos }
        guard rc == SW_TASK_READ_OK else {
            settled[row] = suspension  // completed or gone: its row leaves with its last job's end
            return nil
        }
        switch classify(state) {
        case .later: return now + thresholdNanos
        case .leftAlone(let exempt):
            settled[row] = suspension
            sw_tasks_mark(row, copy.task_id, copy.since_ns, &state, exempt ? UInt16(SW_TASK_EXEMPT) : 0)
            return nil
        case .hung:
            sw_tasks_mark(row, copy.task_id, copy.since_ns, &state, UInt16(SW_TASK_HUNG))
            let found = withUnsafePointer(to: &runtime) { runtime in
                HungAwait(state: state, row: copy, runtime: runtime, names: names, now: now)
            }
            hung[row] = (suspension, state.resume_context)
            reporter.reportHung(found, images: symbolicator.images(for: found.site.frames), now: now)
            nextHungCheck = min(nextHungCheck, now + Self.hungCheckNanos)
            return nil
        }
    }

    /// Reported tasks, looked at again: one that ran again or completed ends its report; open reports are
    /// rewritten with the wait's age.
    private func checkHung(now: UInt64) {
        for (row, reported) in hung {
            var copy = sw_task_row()
            // This thread is the table's only writer: a row it cannot copy is free (its task completed).
            let tabled = sw_tasks_copy_row(row, &copy) == 1
            let sameTask = tabled && copy.task_id == reported.suspension.taskID
            var endNanos: UInt64?
            if !sameTask, case let completed = sw_tasks_completed_at(row, reported.suspension.taskID), completed != 0 {
                // It completed: the job that resumed it started then.
                endNanos = completed
            } else if !sameTask || copy.since_ns != reported.suspension.since {
                // It ran again (its row shows the job that resumed it), or completed and left the table.
                endNanos = sameTask && copy.last_start_ns > reported.suspension.since ? copy.last_start_ns : now
            } else {
                var state = sw_task_state()
                let rc = sw_task_read(&runtime, sw_tasks_address(row), copy.task_id, 0, &state)
                if rc == SW_TASK_READ_CHANGING { continue }
                let still =
                    rc == SW_TASK_READ_OK && Int32(state.state) != Int32(SW_TASK_RUNNING)
                    && state.resume_context == reported.resumeContext
                if !still { endNanos = now }
            }
            guard let endNanos else { continue }
            hung[row] = nil
            reporter.ended(taskID: reported.suspension.taskID, endNanos: endNanos, now: now)
        }
        reporter.refresh(now: now)
    }

    // MARK: Classification

    private enum Verdict {
        /// Running, or enqueued to run (on the global executor: the pool watchdog's business): look again later.
        case later
        /// Waiting on its own children (they carry the wait), or at an exempt await site.
        case leftAlone(exempt: Bool)
        case hung
    }

    private func classify(_ state: sw_task_state) -> Verdict {
        let kind = Int32(state.wait_kind)
        if Int32(state.state) == Int32(SW_TASK_RUNNING) { return .later }
        if Int32(state.state) == Int32(SW_TASK_ENQUEUED), kind != Int32(SW_WAIT_EXECUTOR) || state.wait_address == 0 {
            return .later
        }
        if Int32(state.flags) & Int32(SW_TASK_STRUCTURED_WAIT) != 0 { return .leftAlone(exempt: false) }
        let frames = HungAwait.frames(of: state)
        if let known = verdicts[frames] { return known == nil ? .hung : .leftAlone(exempt: true) }
        let matched = exemptions.match(AwaitSite(frames: names(frames)).frames)
        if verdicts.count >= 8192 { verdicts.removeAll(keepingCapacity: true) }
        verdicts[frames] = .some(matched)
        return matched == nil ? .hung : .leftAlone(exempt: true)
    }

    private func names(_ frames: [UInt64]) -> [StackFrame] {
        symbolicator.symbolicate(frames.map(UnwoundFrame.asyncResumePoint))
    }
}
