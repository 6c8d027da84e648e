// HungAwaitReporter: writes hung-await reports while the waits last, folds repeats, and says when they ended.
import CStallWatchCore
import Dispatch
import Foundation

/// The reports of hung awaits, on the pool watchdog's thread; files are written on a queue of their own (a write's
/// fsyncs can take hundreds of ms on a busy disk).
///
/// One report per await site (its signature: the top frames of the async backtrace): a second task hung at the
/// same site while the report is open is folded into it (`occurrences`, `hungAwait.foldedTaskIds`), and a task
/// hung there again within `dedupWindowMs` of the report's end reopens it. The report is `ongoing` while any of
/// its tasks waits, rewritten every ``rewriteNanos`` with the wait's age, and `ended` (with `endedAt`) once none
/// does; `unrecovered` when the watchdog stops first.
final class HungAwaitReporter {
    private let configuration: StallWatchConfiguration
    private let builder: HungAwaitReportBuilder
    private let writer: ReportWriter
    private let emit: @Sendable (StallEvent) -> Void
    private let writes = DispatchQueue(label: "stallwatch.hung-await-reports")

    /// How often an open report is rewritten with the wait's age.
    static let rewriteNanos: UInt64 = 5_000_000_000

    private struct Report {
        var id: String
        var primary: HungAwait
        var waiting: Set<UInt64>
        var folded: [UInt64] = []
        var occurrences = 1
        var detectedNanos: UInt64
        var firstSeen: Date
        var lastSeen: Date
        var lastWriteNanos: UInt64 = 0
        var primaryEndNanos: UInt64?
        var images: [ImageInfo]
    }

    private var open: [String: Report] = [:]
    private var recent: [String: (report: Report, endedNanos: UInt64)] = [:]
    private var signatureOfTask: [UInt64: String] = [:]

    init(configuration: StallWatchConfiguration, thresholdNanos: UInt64, emit: @escaping @Sendable (StallEvent) -> Void)
    {
        self.configuration = configuration
        builder = HungAwaitReportBuilder(configuration: configuration, thresholdNanos: thresholdNanos)
        writer = ReportWriter(configuration: configuration)
        self.emit = emit
    }

    /// Tasks whose hung await has a report open.
    var reportedTasks: Set<UInt64> { Set(signatureOfTask.keys) }

    /// A task found hung at `now`: a new report, or folded into the open (or recent) one of its await site.
    func reportHung(_ hung: HungAwait, images: [ImageInfo], now: UInt64) {
        let signature = StallSignature.compute(stack: hung.site.frames)
        signatureOfTask[hung.taskID] = signature
        let wall = HungAwaitReportBuilder.date(now)
        if var report = open[signature] {
            report.waiting.insert(hung.taskID)
            report.folded.append(hung.taskID)
            report.occurrences += 1
            report.lastSeen = wall
            open[signature] = report
            write(signature, now: now)
            return
        }
        let window = configuration.intervals.dedupWindow
        if let previous = recent.removeValue(forKey: signature), now &- previous.endedNanos <= window {
            var report = previous.report
            report.primary = hung
            report.primaryEndNanos = nil
            report.waiting = [hung.taskID]
            report.occurrences += 1
            report.lastSeen = wall
            report.detectedNanos = now
            report.images = images
            open[signature] = report
        } else {
            open[signature] = Report(
                id: StallRecorder.makeID(wallNanos: sw_realtime_ns()), primary: hung, waiting: [hung.taskID],
                detectedNanos: now, firstSeen: wall, lastSeen: wall, images: images)
        }
        if let report = write(signature, now: now) { emit(.began(report)) }
    }

    /// Rewrites the open reports not written for ``rewriteNanos``.
    func refresh(now: UInt64) {
        for (signature, report) in open where now &- report.lastWriteNanos >= Self.rewriteNanos {
            write(signature, now: now)
        }
    }

    /// The wait of `taskID` ended at `endNanos` (its task ran again, or completed).
    func ended(taskID: UInt64, endNanos: UInt64, now: UInt64) {
        guard let signature = signatureOfTask.removeValue(forKey: taskID), var report = open[signature] else { return }
        report.waiting.remove(taskID)
        if report.primary.taskID == taskID { report.primaryEndNanos = endNanos }
        open[signature] = report
        guard report.waiting.isEmpty else {
            write(signature, now: now)
            return
        }
        let final = build(report, status: .ended, now: now)
        open[signature] = nil
        recent = recent.filter { now &- $0.value.endedNanos <= configuration.intervals.dedupWindow }
        recent[signature] = (report, now)
        writeFinal(final)
    }

    /// Writes a final report off the watchdog thread and announces its end (or the failure to write it).
    private func writeFinal(_ final: StallReport) {
        let writer = writer, emit = emit
        writes.async {
            do throws(StallWatchError) {
                try writer.write(final)
            } catch {
                emit(.reportFailed(error))
            }
            emit(.ended(final))
        }
    }

    /// The watchdog stops: every open report is written `unrecovered`; returns once they are on disk.
    func stop(now: UInt64) {
        for (signature, report) in open {
            var built = build(report, status: .unrecovered, now: now)
            built.notes.append("the watchdog stopped while the task was still suspended")
            writeFinal(built)
            open[signature] = nil
        }
        signatureOfTask.removeAll()
        writes.sync {}
    }

    private func build(_ report: Report, status: StallReport.Status, now: UInt64) -> StallReport {
        let end = status == .ended ? (report.primaryEndNanos ?? now) : nil
        var built = builder.build(
            report.primary, id: report.id, status: status, now: now, endNanos: end, images: report.images,
            detectedNanos: report.detectedNanos)
        if report.occurrences > 1 {
            built.occurrences = report.occurrences
            built.firstSeen = report.firstSeen
            built.lastSeen = report.lastSeen
            built.hungAwait?.foldedTaskIds = Array(report.folded.suffix(4096))
            let still = report.waiting.subtracting([report.primary.taskID]).count
            if still > 0, status == .ended || report.primaryEndNanos != nil {
                built.notes.append("\(still) more task(s) folded into this report still wait at the same await site")
            }
        }
        return built
    }

    /// Builds the report as it stands and writes it (queued); returns it.
    @discardableResult
    private func write(_ signature: String, now: UInt64) -> StallReport? {
        guard var report = open[signature] else { return nil }
        report.lastWriteNanos = now
        open[signature] = report
        let built = build(report, status: .ongoing, now: now)
        let writer = writer, emit = emit
        writes.async {
            do throws(StallWatchError) {
                try writer.write(built)
            } catch {
                emit(.reportFailed(error))
            }
        }
        return built
    }
}
