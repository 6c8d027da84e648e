// Report schema version 2 on disk: a head for listing, a frame table, and stacks as lists of indices into it.
import Foundation

/// The layout of a version 2 report file, converted to and from the one in-memory ``StallReport``.
///
/// ```
/// {"schemaVersion":2,"head":{…},"frames":[{frame},…],"samples":[{"offsetMs":…,"frames":[0,1,2]},…],
///  "pointStack":{"frames":[…],"count":…},"threads":[{…,"frames":[…]}],"callTree":[{"frame":0,…}],"images":[…]}
/// ```
///
/// Each distinct frame is written once, in `frames`; samples, the point stack, thread snapshots and call-tree
/// nodes name frames by their index there. `head` comes first and holds everything `reports list` and
/// `reports summary` need (ids, times, cause, the top frame, sample offsets), so a reader of many files can
/// stop after it (``ReportStore`` reads only a file's first bytes for listings). Compact JSON, sorted keys
/// within each object. The JSON Schema is `Config/stall-report-2.schema.json`.
enum ReportDocumentV2 {
    static let version = 2

    /// The small part of a report, first in the file.
    struct Head: Codable, Equatable {
        var id: String
        var status: StallReport.Status
        var severity: StallReport.Severity
        var startedAt: Date
        var endedAt: Date?
        var durationMs: Double
        var detection: StallReport.Detection
        var process: StallReport.ProcessDescription
        var loop: StallReport.LoopDescription
        var signature: String
        var capture: StallReport.CaptureSummary
        var notes: [String]
        var annotations: [String: String]
        var cause: StallReport.Cause?
        var context: StallReport.SystemContext?
        var occurrences: Int?
        var firstSeen: Date?
        var lastSeen: Date?
        var maxDurationMs: Double?
        var startedBeforeAttach: Bool?
        var totalDurationMs: Double?
        var task: StallReport.TaskDescription?
        var pool: StallReport.PoolDescription?
        var hungAwait: StallReport.HungAwaitDescription?
        var symbolication: StallReport.SymbolicationState?
        var snapshotReason: String?
        /// Every sample's `offsetMs`, in order (so listings keep the sample count and times).
        var sampleOffsetsMs: [Double]
        /// The one frame ``ApplicationFrame`` names the stall after, inline.
        var topFrame: StackFrame?
    }

    /// The members of the head that lists, summaries and their filters read: all a listing decodes.
    struct ListingHead: Decodable {
        struct Loop: Decodable {
            var name: String
            var phase: String
            var threadId: Int32
            var iteration: UInt64
        }
        struct Process: Decodable {
            var pid: Int32
            var executable: String
        }
        var id: String
        var status: StallReport.Status
        var severity: StallReport.Severity
        var startedAt: Date
        var endedAt: Date?
        var durationMs: Double
        var loop: Loop
        var process: Process
        /// The cause's kind alone: what `--cause` and `summary --by cause` compare.
        struct Cause: Decodable {
            var kind: StallReport.Cause.Kind
        }
        var signature: String
        var cause: Cause?
        /// What `summary` adds up for a report that folds several stalls.
        var occurrences: Int?
        var firstSeen: Date?
        var lastSeen: Date?
        var maxDurationMs: Double?
        var startedBeforeAttach: Bool?
        var totalDurationMs: Double?
        /// Whether the source lines are all in (a report whose lines are pending is rewritten soon).
        var symbolication: StallReport.SymbolicationState?
        var sampleOffsetsMs: [Double]
        var topFrame: StackFrame?
    }

    /// Everything after the head.
    struct Body: Codable {
        var frames: [StackFrame]
        var samples: [Sample]
        var pointStack: PointStack?
        var threads: [Thread]?
        var callTree: [Node]?
        var images: [ImageInfo]
        /// The same in both formats (its item stacks hold their frames inline).
        var leadUp: StallReport.LeadUp?
    }

    struct Sample: Codable {
        var offsetMs: Double
        var frames: [Int]
        var pauseMicros: Double?
        var error: String?
        var thread: StallReport.ThreadState?
    }

    struct PointStack: Codable {
        var frames: [Int]
        var count: Int
    }

    struct Thread: Codable {
        var threadId: Int32
        var name: String
        var state: String
        var wchan: String?
        var syscall: String?
        var waitAddress: String?
        var waitingForThreadId: Int32?
        var frames: [Int]
        var error: String?
    }

    struct Node: Codable {
        var frame: Int
        var count: Int
        var selfCount: Int
        var children: [Node]
    }

    enum Keys: String, CodingKey {
        case schemaVersion, head
    }

    /// A place in the document named as text (`samples[3]`), for errors found after decoding.
    struct PathKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(_ path: String) { stringValue = path }
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }
}

extension ReportDocumentV2 {
    /// Builds the frame table while converting stacks to index lists; the first use of a frame fixes its index.
    struct FrameTable {
        private(set) var frames: [StackFrame] = []
        private var indices: [StackFrame: Int] = [:]

        mutating func indices(of stack: [StackFrame]) -> [Int] { stack.map { index(of: $0) } }

        mutating func index(of frame: StackFrame) -> Int {
            if let known = indices[frame] { return known }
            indices[frame] = frames.count
            frames.append(frame)
            return frames.count - 1
        }
    }

    static func head(of report: StallReport) -> Head {
        Head(
            id: report.id, status: report.status, severity: report.severity, startedAt: report.startedAt,
            endedAt: report.endedAt, durationMs: report.durationMs, detection: report.detection,
            process: report.process, loop: report.loop, signature: report.signature, capture: report.capture,
            notes: report.notes, annotations: report.annotations, cause: report.cause, context: report.context,
            occurrences: report.occurrences, firstSeen: report.firstSeen, lastSeen: report.lastSeen,
            maxDurationMs: report.maxDurationMs, startedBeforeAttach: report.startedBeforeAttach,
            totalDurationMs: report.totalDurationMs, task: report.task,
            pool: report.pool, hungAwait: report.hungAwait, symbolication: report.symbolication,
            snapshotReason: report.snapshotReason, sampleOffsetsMs: report.samples.map(\.offsetMs),
            topFrame: topFrame(of: report))
    }

    /// The frame that, alone, names the stall as the whole stack does (see ``ApplicationFrame``).
    static func topFrame(of report: StallReport) -> StackFrame? {
        guard let named = report.applicationFrame else { return nil }
        let stack = report.pointStack?.frames ?? report.samples.first(where: { !$0.frames.isEmpty })?.frames ?? []
        return stack.first { ApplicationFrame(frames: [$0]) == named }
    }

    static func body(of report: StallReport) -> Body {
        var table = FrameTable()
        let samples = report.samples.map { sample in
            Sample(
                offsetMs: sample.offsetMs, frames: table.indices(of: sample.frames), pauseMicros: sample.pauseMicros,
                error: sample.error, thread: sample.thread)
        }
        let point = report.pointStack.map { PointStack(frames: table.indices(of: $0.frames), count: $0.count) }
        let threads = report.threads?.map { thread in
            Thread(
                threadId: thread.threadId, name: thread.name, state: thread.state, wchan: thread.wchan,
                syscall: thread.syscall, waitAddress: thread.waitAddress?.hexAddress,
                waitingForThreadId: thread.waitingForThreadId, frames: table.indices(of: thread.frames),
                error: thread.error)
        }
        func convert(_ node: CallTree.Node) -> Node {
            Node(
                frame: table.index(of: node.frame), count: node.count, selfCount: node.selfCount,
                children: node.children.map(convert))
        }
        let tree = report.callTree?.map(convert)
        return Body(
            frames: table.frames, samples: samples, pointStack: point, threads: threads, callTree: tree,
            images: report.images, leadUp: report.leadUp)
    }
}
