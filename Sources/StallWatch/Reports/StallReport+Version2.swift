// Reading and writing report schema version 2 (ReportDocumentV2), and the expanded version 1 form.
import Foundation

extension StallReport {
    /// The report in the file format this build writes (schema version 2): the head, then the body, compact
    /// JSON, a final newline. Deterministic: the same report always gives the same bytes.
    func encodedVersion2() throws -> Data {
        let encoder = Self.makeCompactEncoder()
        let head = try encoder.encode(ReportDocumentV2.head(of: self))
        let body = try encoder.encode(ReportDocumentV2.body(of: self))
        // `{"schemaVersion":2,"head":{…},` + the body's members: the head first, so listings can stop after it.
        var data = Data("{\"schemaVersion\":\(ReportDocumentV2.version),\"head\":".utf8)
        data.append(head)
        if body.count > 2 {
            data.append(UInt8(ascii: ","))
            data.append(body.dropFirst())
        } else {
            data.append(UInt8(ascii: "}"))
        }
        data.append(UInt8(ascii: "\n"))
        return data
    }

    /// The expanded form of any report: the version 1 layout (every stack with its frames inline, every frame
    /// with symbol, image, offset, file and line), pretty-printed, with `schemaVersion` 1. What
    /// `stallwatch reports show --json` prints, so scripts never resolve frame indices themselves.
    /// - Throws: `StallWatchError(.report)` if a value cannot be encoded (a non-finite number).
    public func expandedJSON() throws(StallWatchError) -> Data {
        do {
            var copy = self
            copy.schemaVersion = 1
            var data = try Self.makeEncoder().encode(copy)
            data.append(UInt8(ascii: "\n"))
            return data
        } catch {
            throw StallWatchError(.report, "cannot encode report \(id): \(error)", context: ["id": id])
        }
    }

    /// A new encoder like ``makeEncoder()`` but without pretty printing: what report files hold.
    static func makeCompactEncoder() -> JSONEncoder {
        let encoder = makeEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }

    /// The listing form: what lists and summaries read, and neutral values for the rest (no detection or
    /// capture figures, notes, annotations or context; the cause's kind without its evidence).
    init(listingHead head: ReportDocumentV2.ListingHead) {
        self.init(
            id: head.id, status: head.status, severity: head.severity, startedAt: head.startedAt,
            endedAt: head.endedAt, durationMs: head.durationMs,
            detection: Detection(
                source: "", strategy: .deadline, thresholdMs: 0, hangThresholdMs: 0, detectedAt: head.startedAt,
                latencyMs: 0),
            process: ProcessDescription(
                pid: head.process.pid, executable: head.process.executable, buildId: nil, host: ""),
            loop: LoopDescription(
                name: head.loop.name, threadId: head.loop.threadId, phase: head.loop.phase,
                iteration: head.loop.iteration),
            samples: head.sampleOffsetsMs.map { Sample(offsetMs: $0, frames: []) }, images: [],
            signature: head.signature, capture: CaptureSummary(method: "", sampleIntervalMs: 0))
        cause = head.cause.map { Cause(kind: $0.kind, evidence: []) }
        occurrences = head.occurrences
        firstSeen = head.firstSeen
        lastSeen = head.lastSeen
        maxDurationMs = head.maxDurationMs
        startedBeforeAttach = head.startedBeforeAttach
        totalDurationMs = head.totalDurationMs
        symbolication = head.symbolication
        if let top = head.topFrame {
            if samples.isEmpty {
                // No thread was sampled (a hung await): the stall is named after its point stack.
                pointStack = PointStack(frames: [top], count: 1)
            } else {
                samples[0].frames = [top]
            }
        }
    }

    /// Decodes a version 2 document from `decoder`'s top level. With `listing`, only the head's members that
    /// lists read (a file's first bytes may end after the head): the model then has one sample per offset, the
    /// top frame as the frames of the first sample (as the point stack when there are none), no images, threads,
    /// call tree or other point stack, and neutral detection and capture values.
    init(version2From decoder: any Decoder, listing: Bool) throws {
        let c = try decoder.container(keyedBy: ReportDocumentV2.Keys.self)
        if listing {
            self.init(listingHead: try c.decode(ReportDocumentV2.ListingHead.self, forKey: .head))
            return
        }
        let head = try c.decode(ReportDocumentV2.Head.self, forKey: .head)
        self.init(
            id: head.id, status: head.status, severity: head.severity, startedAt: head.startedAt,
            endedAt: head.endedAt, durationMs: head.durationMs, detection: head.detection, process: head.process,
            loop: head.loop, samples: [], images: [], signature: head.signature, capture: head.capture,
            notes: head.notes, annotations: head.annotations)
        cause = head.cause
        context = head.context
        occurrences = head.occurrences
        firstSeen = head.firstSeen
        lastSeen = head.lastSeen
        maxDurationMs = head.maxDurationMs
        startedBeforeAttach = head.startedBeforeAttach
        totalDurationMs = head.totalDurationMs
        task = head.task
        pool = head.pool
        hungAwait = head.hungAwait
        symbolication = head.symbolication
        snapshotReason = head.snapshotReason
        let body = try ReportDocumentV2.Body(from: decoder)
        func frames(_ indices: [Int], at path: String) throws -> [StackFrame] {
            try indices.map { index in
                guard body.frames.indices.contains(index) else {
                    throw DecodingError.dataCorrupted(
                        .init(
                            codingPath: [ReportDocumentV2.PathKey(path)],
                            debugDescription: "frame index \(index) is not in frames[]"))
                }
                return body.frames[index]
            }
        }
        samples = try body.samples.enumerated().map { number, sample in
            Sample(
                offsetMs: sample.offsetMs, frames: try frames(sample.frames, at: "samples[\(number)]"),
                pauseMicros: sample.pauseMicros, error: sample.error, thread: sample.thread)
        }
        images = body.images
        if let point = body.pointStack {
            pointStack = PointStack(frames: try frames(point.frames, at: "pointStack"), count: point.count)
        }
        threads = try body.threads?.enumerated().map { number, thread in
            var address: UInt64?
            if let text = thread.waitAddress {
                guard let value = UInt64(hexAddress: text) else {
                    throw DecodingError.dataCorrupted(
                        .init(
                            codingPath: [ReportDocumentV2.PathKey("threads[\(number)].waitAddress")],
                            debugDescription: "\"\(text)\" is not a hexadecimal address"))
                }
                address = value
            }
            return ThreadSnapshot(
                threadId: thread.threadId, name: thread.name, state: thread.state, wchan: thread.wchan,
                syscall: thread.syscall, waitAddress: address, waitingForThreadId: thread.waitingForThreadId,
                frames: try frames(thread.frames, at: "threads[\(number)]"), error: thread.error)
        }
        func convert(_ node: ReportDocumentV2.Node) throws -> CallTree.Node {
            CallTree.Node(
                frame: try frames([node.frame], at: "callTree")[0], count: node.count, selfCount: node.selfCount,
                children: try node.children.map(convert))
        }
        callTree = try body.callTree?.map(convert)
        leadUp = body.leadUp
    }
}
