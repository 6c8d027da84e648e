// Turns one detected stall into a report: samples the loop thread, unwinds, symbolicates and writes.
import CStallWatch
import Foundation

/// Follows one stall at a time on the watchdog thread: a sample at detection and then every
/// `sampleIntervalMs` (at most `maxSamples`), a provisional report at detection, the final one at the end.
///
/// Capture problems (a handler that did not run, a stack that would not unwind) are recorded in the report,
/// never thrown: a partial report beats no report.
final class StallRecorder: @unchecked Sendable {  // Used by the watchdog thread only, after hand-off.
    struct RawSample {
        var offsetNanos: UInt64
        var addresses: [UInt64]
        var pauseNanos: UInt64?
        var unwindNanos: UInt64?
        var error: String?
    }

    let configuration: StallWatchConfiguration
    let loopName: String
    let sampler: SignalSampler?
    let unwinder: StackUnwinder?
    /// The configured mode, for final reports.
    let symbolicator: Symbolicator
    /// Names only (no DWARF line tables, whose first load can take tens of ms), for the provisional report
    /// that must be on disk within a few ms of detection.
    let quickSymbolicator: Symbolicator
    let writer: ReportWriter
    let emit: @Sendable (StallEvent) -> Void
    /// Problems met when the recorder was built (no free signal, …), repeated in every report.
    let setupErrors: [String]
    private(set) var reportDirectory: String

    private var stall: StallDetector.Stall?
    private var thread: SampledThread?
    private var annotations: [String: String] = [:]
    private var samples: [RawSample] = []
    private var captureErrors: [String] = []
    private var notes: [String] = []
    private var reportID = ""
    private var wallAtBegin: UInt64 = 0
    private var monoAtBegin: UInt64 = 0
    private var detectedWall: UInt64 = 0
    private(set) var nextSampleAt: UInt64?
    private static let counter = Counter()

    init(
        configuration: StallWatchConfiguration, loopName: String, emit: @escaping @Sendable (StallEvent) -> Void
    ) {
        self.configuration = configuration
        self.loopName = loopName
        self.emit = emit
        var errors: [String] = []
        do {
            sampler = try SignalSampler.shared()
        } catch {
            sampler = nil
            errors.append("in-process sampling unavailable: \(error.message)")
        }
        do {
            unwinder = try StackUnwinder(processID: getpid())
        } catch {
            unwinder = nil
            errors.append("unwinder unavailable: \(error.message)")
        }
        symbolicator = Symbolicator(processID: getpid(), mode: configuration.symbolicationMode)
        quickSymbolicator = configuration.symbolicationMode == .full
            ? Symbolicator(processID: getpid(), mode: .fast) : symbolicator
        let directory = configuration.reportDirectory.isEmpty ? ReportWriter.defaultDirectory : configuration.reportDirectory
        reportDirectory = directory
        writer = ReportWriter(directory: directory, maxReports: configuration.maxReports)
        setupErrors = errors
    }

    var isFollowing: Bool { stall != nil }

    // MARK: Lifecycle of one stall

    func begin(_ stall: StallDetector.Stall, thread: SampledThread?, annotations: [String: String], now: UInt64) {
        self.stall = stall
        self.thread = thread
        self.annotations = annotations
        samples = []
        captureErrors = []
        notes = stall.notes
        wallAtBegin = sw_realtime_ns()
        monoAtBegin = now
        detectedWall = wallAtBegin
        reportID = Self.makeID(wallNanos: wallAtBegin)
        takeSample(now: now)
        if let report = write(status: .ongoing, endNanos: nil, symbolicateAll: false) { emit(.began(report)) }
    }

    /// Takes a sample if one is due; returns true if it did.
    @discardableResult
    func sampleIfDue(now: UInt64) -> Bool {
        guard let due = nextSampleAt, now >= due else { return false }
        takeSample(now: now)
        return true
    }

    func escalate(_ stall: StallDetector.Stall) {
        self.stall = stall
        if let report = write(status: .ongoing, endNanos: nil, symbolicateAll: false) { emit(.escalated(report)) }
    }

    func end(endNanos: UInt64) {
        guard stall != nil else { return }
        if let report = write(status: .ended, endNanos: endNanos, symbolicateAll: true) { emit(.ended(report)) }
        reset()
    }

    /// The watchdog is stopping while the loop is still stuck.
    func abandon(now: UInt64) {
        guard stall != nil else { return }
        notes.append("the watchdog stopped while the loop was still stuck")
        if let report = write(status: .unrecovered, endNanos: nil, symbolicateAll: true, now: now) {
            emit(.ended(report))
        }
        reset()
    }

    func addNote(_ note: String) {
        if stall != nil { notes.append(note) }
    }

    private func reset() {
        stall = nil
        thread = nil
        samples = []
        nextSampleAt = nil
    }

    // MARK: Sampling

    private func takeSample(now: UInt64) {
        guard let stall else { return }
        let interval = UInt64(configuration.sampleIntervalMs) * 1_000_000
        nextSampleAt = samples.count + 1 < configuration.maxSamples ? now &+ interval : nil
        var sample = RawSample(offsetNanos: now &- stall.startNanos, addresses: [])
        guard let sampler, let unwinder, let thread else {
            sample.error = thread == nil ? "the loop thread is unknown" : "no sampler"
            samples.append(sample)
            return
        }
        switch sampler.capture(thread, timeout: .milliseconds(configuration.captureTimeoutMs)) {
        case .success(let capture):
            sample.pauseNanos = capture.pauseNanoseconds
            let stack = unwinder.unwind(capture, maxFrames: configuration.maxFrames)
            sample.addresses = stack.addresses
            sample.unwindNanos = stack.unwindNanoseconds
            if let error = stack.error, stack.addresses.count < 2 { sample.error = error }
        case .failure(let error):
            sample.error = error.message
            captureErrors.append("sample \(samples.count): \(error.message)")
        }
        samples.append(sample)
        emit(.sampled(reportID: reportID, index: samples.count - 1, pauseMicros: sample.pauseNanos.map(Self.micros)))
    }

    // MARK: Report

    private func write(status: StallReport.Status, endNanos: UInt64?, symbolicateAll: Bool, now: UInt64? = nil)
        -> StallReport?
    {
        guard let report = buildReport(status: status, endNanos: endNanos, symbolicateAll: symbolicateAll, now: now)
        else { return nil }
        do {
            try writer.write(report)
        } catch {
            emit(.reportFailed(error))
        }
        return report
    }

    private func buildReport(status: StallReport.Status, endNanos: UInt64?, symbolicateAll: Bool, now: UInt64?)
        -> StallReport?
    {
        guard let stall else { return nil }
        let current = now ?? sw_monotonic_ns()
        let durationNanos = (endNanos ?? current) &- stall.startNanos
        let symbolStart = sw_monotonic_ns()
        let chosen = symbolicateAll ? samples : Array(samples.prefix(1))
        let symbols = symbolicateAll ? symbolicator : quickSymbolicator
        let sampleFrames = chosen.map { symbols.symbolicate($0.addresses) }
        let symbolicationNanos = sw_monotonic_ns() &- symbolStart
        let reportSamples = zip(chosen, sampleFrames).map { raw, frames in
            StallReport.Sample(
                offsetMs: Self.millis(raw.offsetNanos), frames: frames, pauseMicros: raw.pauseNanos.map(Self.micros),
                error: raw.error)
        }
        let allFrames = sampleFrames.flatMap { $0 }
        let pauses = samples.compactMap(\.pauseNanos).map(Self.micros).sorted()
        let unwinds = samples.compactMap(\.unwindNanos).map(Self.micros).sorted()
        let severity: StallReport.Severity =
            durationNanos >= UInt64(configuration.hangThresholdMs) * 1_000_000 || stall.isHang ? .hang : .stall
        return StallReport(
            id: reportID, status: status, severity: severity, startedAt: wallDate(stall.startNanos),
            endedAt: endNanos.map(wallDate), durationMs: Self.millis(durationNanos),
            detection: .init(
                source: "in-process", strategy: configuration.strategy, thresholdMs: Double(configuration.thresholdMs),
                hangThresholdMs: Double(configuration.hangThresholdMs), detectedAt: wallDate(stall.detectedNanos),
                latencyMs: Self.millis(stall.latencyNanos)),
            process: ProcessIdentity.current,
            loop: .init(
                name: loopName, threadId: thread?.threadID ?? 0, phase: stall.activity.description,
                iteration: stall.sequence),
            samples: reportSamples, images: symbols.images(for: allFrames),
            signature: StallSignature.compute(samples: reportSamples),
            capture: .init(
                method: "signal", sampleIntervalMs: Double(configuration.sampleIntervalMs),
                samplesTaken: samples.count, samplesFailed: samples.filter { $0.error != nil }.count,
                pauseMicrosMedian: pauses.isEmpty ? nil : pauses[pauses.count / 2], pauseMicrosMax: pauses.last,
                unwindMicrosMedian: unwinds.isEmpty ? nil : unwinds[unwinds.count / 2],
                symbolicationMicros: Self.micros(symbolicationNanos),
                errors: setupErrors + captureErrors + symbols.errors),
            notes: notes, annotations: annotations)
    }

    private func wallDate(_ mono: UInt64) -> Date {
        let wall = Double(wallAtBegin) - (Double(monoAtBegin) - Double(mono))
        return Date(timeIntervalSince1970: wall / 1e9)
    }

    static func millis(_ nanos: UInt64) -> Double { (Double(nanos) / 1e4).rounded() / 100 }
    static func micros(_ nanos: UInt64) -> Double { (Double(nanos) / 10).rounded() / 100 }

    /// `20261130T221500.123Z-4242-3`: sortable, unique per process.
    static func makeID(wallNanos: UInt64) -> String {
        let seconds = time_t(wallNanos / 1_000_000_000)
        var tm = tm()
        var t = seconds
        gmtime_r(&t, &tm)
        let stamp = String(
            format: "%04d%02d%02dT%02d%02d%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
            tm.tm_min, tm.tm_sec, Int(wallNanos / 1_000_000 % 1000))
        return "\(stamp)-\(getpid())-\(counter.next())"
    }
}

/// A process-wide counter for report ids.
final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var value = 0
    func next() -> Int {
        lock.lock()
        defer { lock.unlock() }
        value += 1
        return value
    }
}
