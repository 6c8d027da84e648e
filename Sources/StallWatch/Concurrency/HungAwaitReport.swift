// HungAwaitReport: the report of one hung await, built from what the watchdog read of the task.
import CStallWatchCore
import Foundation

/// Builds the report of a hung await: cause `hungAwait`, the `task` and `hungAwait` sections, the async backtrace
/// as the point stack, no samples (no thread is stuck: there is nothing to sample).
struct HungAwaitReportBuilder {
    let configuration: StallWatchConfiguration
    let thresholdNanos: UInt64

    /// The report of `hung`, `ongoing` at `now` or ended at `endNanos` (CLOCK_MONOTONIC).
    func build(
        _ hung: HungAwait, id: String, status: StallReport.Status, now: UInt64, endNanos: UInt64?,
        images: [ImageInfo], detectedNanos: UInt64
    ) -> StallReport {
        let wall = { (mono: UInt64) in Self.date(mono) }
        let end = endNanos ?? now
        let durationNanos = end > hung.sinceNanos ? end - hung.sinceNanos : 0
        let crossed = hung.sinceNanos &+ thresholdNanos
        var report = StallReport(
            id: id, status: status, severity: .hang, startedAt: wall(hung.sinceNanos), endedAt: endNanos.map(wall),
            durationMs: StallReport.milliseconds(durationNanos),
            detection: .init(
                source: .concurrencyTasks, strategy: configuration.strategy,
                thresholdMs: StallReport.milliseconds(thresholdNanos),
                hangThresholdMs: StallReport.milliseconds(thresholdNanos), detectedAt: wall(detectedNanos),
                latencyMs: StallReport.milliseconds(detectedNanos > crossed ? detectedNanos - crossed : 0)),
            process: ProcessIdentity.current,
            loop: .init(
                name: "concurrency-tasks", threadId: hung.threadID, phase: "suspended", iteration: UInt64(hung.runs)),
            samples: [], images: images, signature: StallSignature.compute(stack: hung.site.frames),
            capture: .init(method: .none, sampleIntervalMs: 0))
        report.occurrences = 1
        report.pointStack = hung.site.frames.isEmpty ? nil : .init(frames: hung.site.frames, count: 1)
        report.task = .init(id: hung.taskID, name: hung.taskName, priority: hung.priority)
        report.hungAwait = .init(
            waitKind: hung.waitKind.rawValue, waitAddress: hung.waitAddress, chain: hung.chain, chainEnd: hung.chainEnd,
            suspendedSince: wall(hung.sinceNanos), ageIsUpperBound: hung.ageIsUpperBound,
            awaitSite: hung.site.innermost, awaitingFunction: hung.site.awaitingFunction,
            awaitedBy: hung.awaitedBy.isEmpty ? nil : hung.awaitedBy, firstSeen: wall(hung.firstSeenNanos),
            runs: hung.runs)
        report.cause = .init(kind: .hungAwait, evidence: evidence(hung, durationNanos: durationNanos, ended: endNanos))
        if hung.ageIsUpperBound {
            report.notes.append(
                "the task ran where the watchdog does not see it (an actor's executor) after its last job on the "
                    + "global executor: it has been suspended at most this long")
        }
        return report
    }

    private func evidence(_ hung: HungAwait, durationNanos: UInt64, ended: UInt64?) -> [String] {
        let task = Self.describe(id: hung.taskID, name: hung.taskName)
        let age = describeNanoseconds(durationNanos)
        let bound = hung.ageIsUpperBound ? "at most " : ""
        var lines: [String]
        let site = hung.site.awaitingFunction.map { " in \($0)" } ?? ""
        switch hung.waitKind {
        case .continuation:
            lines = ["\(task) awaited a continuation\(site) that was not resumed for \(bound)\(age)"]
        case .task:
            lines = ["\(task) awaited another task's completion\(site) for \(bound)\(age)"]
        case .taskGroup:
            lines = ["\(task) awaited its task group's next child\(site) for \(bound)\(age)"]
        case .executor:
            lines = ["\(task) was enqueued on an actor that did not run it for \(bound)\(age)"]
        case .unknown:
            lines = [
                "\(task) was suspended\(site) for \(bound)\(age); what it waits for could not be read and checked "
                    + "(\(hung.waitCheck ?? "its dependency record did not validate"))"
            ]
        }
        if let site = hung.site.innermost { lines.append("it awaits in \(site)") }
        for (index, link) in hung.chain.enumerated() {
            let who = Self.describe(id: link.id, name: link.name)
            let verb = index == 0 ? "the awaited" : "which awaits"
            var line = "\(verb) \(who) is \(link.state)"
            if let kind = link.waitKind { line += ", awaiting a \(kind)" }
            if let function = link.awaitingFunction { line += " in \(function)" }
            if let ms = link.suspendedMs { line += " for \(link.ageIsUpperBound == true ? "at most " : "")\(ms) ms" }
            lines.append(line)
        }
        if hung.chainEnd == "cycle" {
            lines.append(
                "the chain of awaited tasks comes back to a task already in it: these tasks wait on each other")
        }
        for waiter in hung.awaitedBy {
            let how = waiter.via == "taskGroup" ? "through its task group" : "through an async let"
            lines.append("\(Self.describe(id: waiter.id, name: waiter.name)) waits on it \(how)")
        }
        if let ended {
            lines.append(
                "the wait ended \(describeNanoseconds(ended > hung.sinceNanos ? ended - hung.sinceNanos : 0)) after it began"
            )
        }
        return lines
    }

    static func describe(id: UInt64, name: String?) -> String {
        name.map { "task \(id) \"\($0)\"" } ?? "task \(id)"
    }

    /// The wall-clock date of a CLOCK_MONOTONIC time.
    static func date(_ mono: UInt64) -> Date {
        let wall = Double(sw_realtime_ns()) - (Double(sw_monotonic_ns()) - Double(mono))
        return Date(timeIntervalSince1970: wall / 1e9)
    }
}
