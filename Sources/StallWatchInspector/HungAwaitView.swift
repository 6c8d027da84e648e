// HungAwaitView: the rows of a hung-await report's own section, shared by `reports show` and the HTML page.
import StallWatch

/// What a hung await waits on, as label and value rows: the task, the wait, since when, where it awaits, the chain
/// of awaited tasks with their own state, the tasks that wait on it, and the tasks folded into the report.
struct HungAwaitView {
    let format: ReportTextFormat

    func rows(_ report: StallReport) -> [(String, String)] {
        guard let hung = report.hungAwait else { return [] }
        let ms = ReportTextFormat.number
        var rows: [(String, String)] = []
        if let task = report.task {
            rows.append(("task", Self.describe(id: task.id, name: task.name) + ", priority \(task.priorityName)"))
        }
        rows.append(
            ("waits on", Self.waitKind(hung.waitKind) + (hung.waitAddress.map { " at \($0.hexAddress)" } ?? "")))
        let bound = hung.ageIsUpperBound ? " (at most: it may have run unseen on an actor since)" : ""
        rows.append(("suspended since", format.localTime(hung.suspendedSince, milliseconds: true) + bound))
        if let function = hung.awaitingFunction { rows.append(("awaiting function", function)) }
        if let site = hung.awaitSite { rows.append(("await site", site)) }
        for (index, link) in hung.chain.enumerated() {
            var text = Self.describe(id: link.id, name: link.name) + ": \(link.state)"
            if let kind = link.waitKind { text += ", waits on \(Self.waitKind(kind))" }
            if let function = link.awaitingFunction ?? link.awaitSite { text += " in \(function)" }
            if let age = link.suspendedMs {
                text += " for \(link.ageIsUpperBound == true ? "at most " : "")\(ms(age)) ms"
            }
            rows.append((index == 0 ? "awaited task" : "which awaits", text))
        }
        if let end = hung.chainEnd { rows.append(("chain ends", Self.chainEnd(end))) }
        for waiter in hung.awaitedBy ?? [] {
            let via = waiter.via.map { " (\($0 == "taskGroup" ? "through its task group" : "through an async let"))" }
            rows.append(("awaited by", Self.describe(id: waiter.id, name: waiter.name) + (via ?? "")))
        }
        rows.append(("first seen", format.localTime(hung.firstSeen, milliseconds: true) + ", \(hung.runs) jobs"))
        if let folded = hung.foldedTaskIds, !folded.isEmpty {
            let shown = folded.prefix(8).map(String.init).joined(separator: ", ")
            rows.append(("folded tasks", shown + (folded.count > 8 ? " and \(folded.count - 8) more" : "")))
        }
        return rows
    }

    static func describe(id: UInt64, name: String?) -> String {
        name.map { "\(id) \"\($0)\"" } ?? "\(id)"
    }

    static func waitKind(_ kind: String) -> String {
        switch kind {
        case "continuation": "a continuation"
        case "task": "another task's completion"
        case "taskGroup": "its task group's next child"
        case "executor": "an executor (enqueued on an actor)"
        case "unknown": "unknown (the runtime's record did not check out)"
        default: kind
        }
    }

    static func chainEnd(_ end: String) -> String {
        switch end {
        case "root": "at a task that waits on no other task"
        case "cycle": "back at a task already in it: these tasks wait on each other"
        case "depth": "too long to follow"
        case "unreadable": "at a task that could not be read and checked"
        case "completed": "at a task that has completed"
        default: end
        }
    }
}
