// Dedup and backoff: repeats of a stall signature are counted, not rewritten; new files are capped per hour.
import Synchronization

/// Decides for each finished stall whether it gets a report file of its own.
///
/// - A stall whose signature and cause match one reported within `window` is folded into that report: its
///   `occurrences` goes up and `lastSeen` moves, and no new file appears. The same innermost frames with another
///   cause (a lock wrapper a deadlock and a plain lock wait both pass through) are another stall. A hang is never folded, nor a stall
///   more than ``longerFactor`` times as long as the report it would fold into: those get a file of their own
///   (with their samples), and later repeats fold into it. Nor is a stall folded whose samples show another
///   culprit: an application function that callers of the innermost application frame pass through in at least
///   a quarter of its samples, or in samples spanning the threshold, and in none of the report's (a loop that waited on the disk and then, without
///   turning, on a lock: the same top frame, and a second cause that a fold would lose).
/// - At most `maxPerHour` new report files are written per rolling hour; stalls beyond the cap are counted and
///   the count is noted in the next report that is written.
/// - Annealing: a signature seen before is sampled less often (the interval doubles per repeat, up to 8×), so
///   a stall that keeps recurring costs less each time.
struct StallDeduplicator {
    package struct Entry {
        var reportID: String
        var occurrences: Int
        var lastSeenNanos: UInt64
        /// The duration of the report folded into.
        var durationMs: Double
        /// Its cause's kind (nil: none).
        var cause: String? = nil
    }

    /// A stall longer than this many times the report it matches is reported on its own.
    static let longerFactor = 2.0

    enum Decision: Equatable {
        case writeNew
        case fold(reportID: String, occurrences: Int)
        case suppress
    }

    let windowNanos: UInt64
    let maxPerHour: Int
    private var entries: [String: Entry] = [:]
    private var written: [UInt64] = []
    /// Stalls not written because of the hourly cap since the last written report.
    private(set) var suppressed = 0

    init(windowNanos: UInt64, maxPerHour: Int) {
        self.windowNanos = windowNanos
        self.maxPerHour = maxPerHour
    }

    /// What to do with a finished stall of `signature` at `now`; records the outcome.
    mutating func decide(
        signature: String, reportID: String, now: UInt64, severity: StallReport.Severity = .stall,
        durationMs: Double = 0, cause: String? = nil, anotherCulprit: Bool = false
    ) -> Decision {
        if signature != "unknown", var entry = entries[signature], now &- entry.lastSeenNanos <= windowNanos,
            severity != .hang, durationMs <= entry.durationMs * Self.longerFactor, entry.cause == cause,
            !anotherCulprit
        {
            entry.occurrences += 1
            entry.lastSeenNanos = now
            entries[signature] = entry
            return .fold(reportID: entry.reportID, occurrences: entry.occurrences)
        }
        let hour: UInt64 = 3_600_000_000_000
        written.removeAll { now &- $0 > hour }
        guard written.count < maxPerHour else {
            suppressed += 1
            return .suppress
        }
        written.append(now)
        if signature != "unknown" {
            entries[signature] = Entry(
                reportID: reportID, occurrences: 1, lastSeenNanos: now, durationMs: durationMs, cause: cause)
        }
        if entries.count > 4096 { entries = entries.filter { now &- $0.value.lastSeenNanos <= windowNanos } }
        return .writeNew
    }

    /// Whether `report` shows a culprit that `earlier` does not: an application function (named, outside system
    /// and runtime libraries) on the stack below the innermost application frame in at least a quarter of
    /// `report`'s samples (or in samples spanning the stall threshold: a stall of its own inside a long one), and in
    /// no sample of `earlier`. The innermost application frame itself is left out: a
    /// CPU-bound repeat lands in whichever helper it happened to be in, and its callers are what stay the same.
    static func anotherCulprit(in report: StallReport, besides earlier: StallReport) -> Bool {
        func callers(_ sample: StallReport.Sample) -> Set<String> {
            let application = sample.frames.filter { frame in
                frame.readableName.map { !ApplicationFrame.isMachinery($0) } ?? false
                    && frame.image.map { !ApplicationFrame.isSystemImage($0) } ?? false
            }
            return Set(application.dropFirst().map(StallSignature.key))
        }
        let samples = StallSignature.aggregatable(report.samples)
        guard !samples.isEmpty else { return false }
        let known = StallSignature.aggregatable(earlier.samples).reduce(into: Set<String>()) {
            $0.formUnion(callers($1))
        }
        var seen: [String: (count: Int, firstMs: Double, lastMs: Double)] = [:]
        for sample in samples {
            for key in callers(sample) where !known.contains(key) {
                let entry = seen[key] ?? (0, sample.offsetMs, sample.offsetMs)
                seen[key] = (entry.count + 1, min(entry.firstMs, sample.offsetMs), max(entry.lastMs, sample.offsetMs))
            }
        }
        let thresholdMs = report.detection.thresholdMs
        return seen.values.contains { $0.count * 4 >= samples.count || $0.lastMs - $0.firstMs >= thresholdMs }
    }

    /// Takes the count of suppressed stalls (to note in the report being written).
    mutating func takeSuppressed() -> Int {
        defer { suppressed = 0 }
        return suppressed
    }

    /// The sampling interval multiplier for a stall whose first sample has `signature`: 1, 2, 4 or 8.
    func samplingScale(signature: String, now: UInt64) -> UInt64 {
        guard let entry = entries[signature], now &- entry.lastSeenNanos <= windowNanos else { return 1 }
        return 1 << UInt64(min(3, entry.occurrences))
    }
}

/// A ``StallDeduplicator`` behind a lock of its own: the report stage decides with it on its queue, and the
/// watching thread reads it for annealing (``samplingScale(signature:now:)``) without waiting for that queue.
final class SharedDeduplicator: Sendable {
    private let state: Mutex<StallDeduplicator>
    let windowNanos: UInt64

    init(_ deduplicator: StallDeduplicator) {
        windowNanos = deduplicator.windowNanos
        state = Mutex(deduplicator)
    }

    /// What to do with a finished stall; see ``StallDeduplicator/decide(signature:reportID:now:severity:durationMs:)``.
    func decide(
        signature: String, reportID: String, now: UInt64, severity: StallReport.Severity, durationMs: Double,
        cause: String? = nil, anotherCulprit: Bool = false
    ) -> StallDeduplicator.Decision {
        state.withLock {
            $0.decide(
                signature: signature, reportID: reportID, now: now, severity: severity, durationMs: durationMs,
                cause: cause, anotherCulprit: anotherCulprit)
        }
    }

    /// Takes the count of suppressed stalls (to note in the report being written).
    func takeSuppressed() -> Int { state.withLock { $0.takeSuppressed() } }

    /// The sampling interval multiplier for a stall whose first sample has `signature`: 1, 2, 4 or 8.
    func samplingScale(signature: String, now: UInt64) -> UInt64 {
        state.withLock { $0.samplingScale(signature: signature, now: now) }
    }
}
