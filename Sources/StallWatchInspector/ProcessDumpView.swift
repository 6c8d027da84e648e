// ProcessDumpView: renders a ProcessDump for `stallwatch dump` on a terminal.
import Foundation
import StallWatch

/// The text of `stallwatch dump`: the process, a deadlock if there is one, then each thread with its state, how long
/// it has been blocked (at least), system call, wait target and wait channel, the owner of the lock it waits for,
/// and its stack in the short names of the other views; idle threads other than loops folded into one line per
/// identical wait unless `foldIdle` is off.
///
/// Every string that came from the target (thread names, paths, symbols) is escaped (``TerminalText``).
package struct ProcessDumpView: Sendable {
    package var format: ReportTextFormat
    package var useColor: Bool
    /// Idle threads that are neither loops nor holders, as one line per identical wait.
    package var foldIdle: Bool

    package init(format: ReportTextFormat = ReportTextFormat(), useColor: Bool = false, foldIdle: Bool = true) {
        self.format = format
        self.useColor = useColor
        self.foldIdle = foldIdle
    }

    /// The lines of `stallwatch dump`.
    package func lines(_ dump: ProcessDump) -> [String] {
        let style = TextStyle(useColor: useColor)
        let escape = TerminalText.escape
        var out = [
            style.styled("Process \(dump.process.pid) \(escape(dump.process.executable))", "1"),
            "  taken at \(format.localTime(dump.takenAt, milliseconds: true)) on \(escape(dump.process.host)); "
                + "\(dump.threadCount) thread(s)",
        ]
        if dump.loopThreadsGuessed == true {
            out.append(
                "  loops guessed (nothing names them: --tid, --threads, a heartbeat): threads in an event wait, "
                    + "their stuck numbered siblings, the main thread unless idle elsewhere")
        }
        let names = Dictionary(dump.threads.map { ($0.snapshot.threadId, escape($0.snapshot.name)) }) { a, _ in a }
        if let cycle = dump.deadlockThreadIds, let first = cycle.first {
            let path = (cycle + [first]).map { "\($0) \(names[$0] ?? "")" }.joined(separator: " → ")
            out.append(style.styled("  deadlock: each waits for a lock the next one holds: \(path)", "31"))
        }
        let folded = foldIdle ? dump.threads.filter { $0.activity == .idle && $0.role == .other } : []
        let foldedIDs = Set(folded.map(\.snapshot.threadId))
        for thread in dump.threads where !foldedIDs.contains(thread.snapshot.threadId) {
            out.append("")
            let line = heading(thread, names: names, guessed: dump.loopThreadsGuessed == true)
            out.append(thread.role == .loop ? style.styled(line, "1") : line)
            let snapshot = thread.snapshot
            if let owner = snapshot.waitingForThreadId {
                let named = names[owner].map { " \($0)" } ?? ""
                out.append(style.styled("  waits for a lock held by thread \(owner)\(named)", "33"))
            } else if let holder = thread.recordedHolderId {
                let named = names[holder].map { " \($0)" } ?? ""
                let how = thread.recordedHolderEvidence.map { ": \(escape($0))" } ?? ""
                out.append(
                    style.styled(
                        "  waits for a lock whose own structure records thread \(holder)\(named) as its holder (likely, "
                            + "not certain)\(how)", "33"))
                let others = (thread.candidateHolderIds ?? []).filter { $0 != holder }
                if !others.isEmpty {
                    let list = others.map { "\($0) \(names[$0] ?? "")" }.joined(separator: ", ")
                    out.append(style.styled("  other candidate holders: \(list)", "33"))
                }
            } else if let candidates = thread.candidateHolderIds, !candidates.isEmpty {
                let list = candidates.map { "\($0) \(names[$0] ?? "")" }.joined(separator: ", ")
                out.append(style.styled("  the lock records no owner; candidate holders, not certain: \(list)", "33"))
            } else if let process = thread.blockingProcess {
                let named = process.name.isEmpty ? "" : " \(escape(process.name))"
                let text =
                    "  waits on process \(process.processId)\(named)"
                    + escape(BlockingProcessText.thread(process)) + ": \(escape(process.reason))"
                out.append(style.styled(text, "33"))
            } else if snapshot.waitAddress != nil {
                out.append("  the lock's owner is not known (not a glibc mutex, or not held)")
            }
            let waiters = dump.threads.filter { $0.snapshot.waitingForThreadId == snapshot.threadId }
            if !waiters.isEmpty {
                let list = waiters.map { "\($0.snapshot.threadId) \(names[$0.snapshot.threadId] ?? "")" }
                out.append(style.styled("  holds a lock thread(s) " + list.joined(separator: ", ") + " wait for", "33"))
            }
            if let error = snapshot.error, snapshot.frames.isEmpty { out.append("  \(escape(error))") }
            let width = String(max(snapshot.frames.count - 1, 0)).count
            for (number, frame) in snapshot.frames.enumerated() {
                let label = "#" + String(number).padding(toLength: width, withPad: " ", startingAt: 0)
                out.append("  \(label) \(ReportDetailView.describe(TerminalText.escaped(frame)))")
            }
            if let process = thread.blockingProcess, let stack = process.frames, !stack.isEmpty {
                let whose = "process \(process.processId)" + (process.threadId.map { ", thread \($0)" } ?? "")
                out.append(style.styled("  the stack of \(whose) meanwhile:", "33"))
                let width = String(max(stack.count - 1, 0)).count
                for (number, frame) in stack.enumerated() {
                    let label = "#" + String(number).padding(toLength: width, withPad: " ", startingAt: 0)
                    out.append("    \(label) \(ReportDetailView.describe(TerminalText.escaped(frame)))")
                }
            }
        }
        if !folded.isEmpty {
            out += ["", style.styled("Idle threads (--all-threads shows each)", "1")]
            out += idleLines(folded, names: names)
        }
        if !dump.errors.isEmpty {
            out += ["", style.styled("Errors", "1")] + dump.errors.map { "  - \(escape($0))" }
        }
        return out
    }

    /// One line per identical wait (system call and wait channel): `3 × futex [futex_wait_queue], idle ≥ 1.2 s:
    /// 101 worker-1, 102 worker-2, 103 worker-3`.
    private func idleLines(_ threads: [ProcessDump.Thread], names: [Int32: String]) -> [String] {
        let escape = TerminalText.escape
        var groups: [String: [ProcessDump.Thread]] = [:]
        var order: [String] = []
        for thread in threads {
            let key =
                (thread.snapshot.syscall.map { escape($0) } ?? escape(thread.stateDescription))
                + (thread.snapshot.wchan.map { " [\(escape($0))]" } ?? "")
            if groups[key] == nil { order.append(key) }
            groups[key, default: []].append(thread)
        }
        return order.map { key in
            let members = groups[key] ?? []
            let shortest = members.compactMap(\.blockedForAtLeastMs).min()
            let list = members.map { "\($0.snapshot.threadId) \(names[$0.snapshot.threadId] ?? "")" }
            return "  \(members.count) × \(key)" + (shortest.map { ", idle ≥ \(Self.duration($0))" } ?? "") + ": "
                + list.joined(separator: ", ")
        }
    }

    /// `850 ms`, `12.4 s`, `3 min 5 s`.
    static func duration(_ ms: Double) -> String {
        if ms < 1000 { return "\(ReportTextFormat.number(ms.rounded())) ms" }
        if ms < 120_000 { return "\(ReportTextFormat.number((ms / 100).rounded() / 10)) s" }
        let seconds = Int(ms / 1000)
        return "\(seconds / 60) min \(seconds % 60) s"
    }

    /// `thread 123 name (loop): S sleeping, blocked ≥ 12.4 s in futex (word 0x…) [futex_wait_queue], paused 42 µs`
    private func heading(_ thread: ProcessDump.Thread, names: [Int32: String], guessed: Bool) -> String {
        let escape = TerminalText.escape
        let snapshot = thread.snapshot
        var text = "thread \(snapshot.threadId) \(names[snapshot.threadId] ?? "")"
        switch thread.role {
        case .loop: text += guessed ? " (loop, guessed)" : " (loop)"
        case .lockOwner: text += " (lock owner)"
        case .candidateHolder: text += " (candidate holder, not certain)"
        case .other: break
        }
        text += ": \(escape(snapshot.state)) \(escape(thread.stateDescription))"
        if let blocked = thread.blockedForAtLeastMs {
            text += thread.activity == .idle ? ", idle" : ", blocked"
            text += " ≥ \(Self.duration(blocked))"
        } else if thread.activity == .onCPU {
            text += ", on CPU" + (thread.onCPUForAtLeastMs.map { " ≥ \(Self.duration($0)) without a wait" } ?? "")
        }
        if let syscall = snapshot.syscall {
            text += " in \(escape(syscall))"
            if let target = thread.waitTarget { text += " (\(escape(target)))" }
        } else if snapshot.state == "R" {
            text += " (user space)"
        }
        if let wchan = snapshot.wchan { text += " [\(escape(wchan))]" }
        if let pause = thread.pauseMicros { text += ", paused \(ReportTextFormat.number(pause)) µs" }
        return text
    }
}
