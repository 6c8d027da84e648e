// CauseDescription: the cause of a stall as the HTML page states it — the threads involved, with their stacks.
import StallWatch

/// The parts of a report's ``StallReport/Cause`` that name other threads: the blocking thread (a lock's owner),
/// a deadlock's cycle and the candidate holders of a lock that records no owner, each with its name, state and application frame from the thread snapshot.
enum CauseDescription {
    /// `("Blocking thread", "4243 db-writer (S, futex) in DB.commit() + 40")`, and for a deadlock one row with
    /// every thread of the cycle; none when the cause names no other thread.
    static func rows(_ report: StallReport) -> [(String, String)] {
        guard let cause = report.cause else { return [] }
        var rows: [(String, String)] = []
        if let blocking = cause.blockingThreadId, blocking != report.loop.threadId {
            rows.append(("Blocking thread", describe(blocking, in: report)))
        }
        if let cycle = cause.deadlockedThreadIds, !cycle.isEmpty {
            let title = cause.deadlockCertainty == .likely ? "Deadlocked threads (likely)" : "Deadlocked threads"
            rows.append((title, cycle.map { describe($0, in: report) }.joined(separator: "; ")))
        }
        if let process = cause.blockingProcess {
            rows.append(
                (
                    "Blocking process",
                    "\(process.processId)" + (process.name.isEmpty ? "" : " \(process.name)")
                        + BlockingProcessText.thread(process) + " — \(process.reason)"
                        + BlockingProcessText.stack(process)
                ))
        }
        if let candidates = cause.candidateHolders, !candidates.isEmpty {
            let described = candidates.map { holder in
                let thread = holder.processId == nil ? describe(holder.threadId, in: report) : "\(holder.threadId)"
                let process = holder.processId.map { " of process \($0)" } ?? ""
                return "\(thread)\(process) — \(holder.confidence.rawValue): \(holder.reason)"
            }
            rows.append(("Candidate holders (not certain)", described.joined(separator: "; ")))
        }
        return rows
    }

    /// What the loop waited for, in a few words, when the cause names it: `thread 4243 db-writer`,
    /// `deadlock (likely): 4243, 4244`, `process 4242 flock-holder`, `candidates (not certain): 4243 db-writer`.
    static func culprit(_ report: StallReport) -> String? {
        guard let cause = report.cause else { return nil }
        func name(_ tid: Int32) -> String {
            let name = report.threads?.first { $0.threadId == tid }?.name ?? ""
            return name.isEmpty ? "\(tid)" : "\(tid) \(name)"
        }
        if let cycle = cause.deadlockedThreadIds, !cycle.isEmpty {
            return "deadlock" + (cause.deadlockCertainty == .likely ? " (likely)" : "") + ": "
                + cycle.map(name).joined(separator: ", ")
        }
        if let blocking = cause.blockingThreadId, blocking != report.loop.threadId { return "thread " + name(blocking) }
        if let process = cause.blockingProcess {
            return "process \(process.processId)" + (process.name.isEmpty ? "" : " \(process.name)")
        }
        if let candidates = cause.candidateHolders, !candidates.isEmpty {
            let named = candidates.prefix(3).map { holder in
                (holder.processId.map { "process \($0) " } ?? "") + "\(holder.threadId)"
                    + (holder.name.isEmpty ? "" : " \(holder.name)")
            }
            return "candidates (not certain): " + named.joined(separator: ", ")
        }
        return nil
    }

    /// `4243 db-writer (S, futex) in DB.commit() + 40`, or just the id when the snapshot lacks the thread.
    static func describe(_ threadID: Int32, in report: StallReport) -> String {
        guard let thread = report.threads?.first(where: { $0.threadId == threadID }) else { return "\(threadID)" }
        var text = "\(threadID) \(thread.name) (\(thread.state)" + (thread.syscall.map { ", \($0)" } ?? "") + ")"
        if let frame = ApplicationFrame(frames: thread.frames) { text += " in \(frame.description)" }
        return text
    }
}

/// The thread and state of a ``StallReport/Cause/BlockingProcess`` as the views print them after its name.
enum BlockingProcessText {
    /// `, thread 4243 (sleeping, in clock_nanosleep)`, `, sleeping`, or nothing when neither was read.
    static func thread(_ process: StallReport.Cause.BlockingProcess) -> String {
        switch (process.threadId, process.state) {
        case (let tid?, let state?): return ", thread \(tid) (\(state))"
        case (let tid?, nil): return ", thread \(tid)"
        case (nil, let state?): return ", \(state)"
        case (nil, nil): return ""
        }
    }

    /// ` — its stack: clock_nanosleep ← nanosleep ← main`, the innermost named frames first (at most six), or
    /// nothing when its stack was not captured.
    static func stack(_ process: StallReport.Cause.BlockingProcess) -> String {
        let names = (process.frames ?? []).compactMap(\.readableName).prefix(6)
        return names.isEmpty ? "" : " — its stack: " + names.joined(separator: " ← ")
    }
}
