// ProcessDumpView: renders a ProcessDump for `stallwatch dump` on a terminal.
import Foundation
import StallWatch

/// The text of `stallwatch dump`: the process, then each thread with its state, system call, wait target and
/// wait channel, the owner of the lock it waits for, and its stack in the short names of the other views.
///
/// Every string that came from the target (thread names, paths, symbols) is escaped (``TerminalText``).
package struct ProcessDumpView: Sendable {
    package var format: ReportTextFormat
    package var useColor: Bool

    package init(format: ReportTextFormat = ReportTextFormat(), useColor: Bool = false) {
        self.format = format
        self.useColor = useColor
    }

    /// The lines of `stallwatch dump`.
    package func lines(_ dump: ProcessDump) -> [String] {
        let style = TextStyle(useColor: useColor)
        let escape = TerminalText.escape
        var out = [
            style.styled("Process \(dump.process.pid) \(escape(dump.process.executable))", "1"),
            "  taken at \(format.localTime(dump.takenAt, milliseconds: true)) on \(escape(dump.process.host)); "
                + "\(dump.threads.count) of \(dump.threadCount) thread(s) shown"
                + (dump.threads.count < dump.threadCount ? " (--all-threads shows every one)" : ""),
        ]
        let names = Dictionary(dump.threads.map { ($0.snapshot.threadId, escape($0.snapshot.name)) }) { a, _ in a }
        for thread in dump.threads {
            out.append("")
            let line = heading(thread, names: names)
            out.append(thread.role == .loop ? style.styled(line, "1") : line)
            let snapshot = thread.snapshot
            if let owner = snapshot.waitingForThreadId {
                let named = names[owner].map { " \($0)" } ?? ""
                out.append(style.styled("  waits for a lock held by thread \(owner)\(named)", "33"))
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
        }
        if !dump.errors.isEmpty {
            out += ["", style.styled("Errors", "1")] + dump.errors.map { "  - \(escape($0))" }
        }
        return out
    }

    /// `thread 123 name (loop): S sleeping in futex (word 0x…) [futex_wait_queue], paused 42 µs`
    private func heading(_ thread: ProcessDump.Thread, names: [Int32: String]) -> String {
        let escape = TerminalText.escape
        let snapshot = thread.snapshot
        var text = "thread \(snapshot.threadId) \(names[snapshot.threadId] ?? "")"
        switch thread.role {
        case .loop: text += " (loop)"
        case .lockOwner: text += " (lock owner)"
        case .other: break
        }
        text += ": \(escape(snapshot.state)) \(escape(thread.stateDescription))"
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
