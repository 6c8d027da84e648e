// Follows one detected stall: samples the loop thread, gathers evidence, and hands the report to the writer.
import CStallWatchCore
import Foundation

/// Follows one stall at a time on the watchdog thread: a sample at detection and then every
/// `sampleIntervalMs` (at most `maxSamples`; less often for a signature seen before), a provisional report at
/// detection, the final one at the end (or a fold into a recent report with the same signature).
///
/// Capture problems (a handler that did not run, a stack that would not unwind) are recorded in the report,
/// never thrown: a partial report beats no report.
public final class StallRecorder: @unchecked Sendable {  // Used by one watching thread only, after hand-off.
    struct RawSample {
        var offsetNanos: UInt64
        var addresses: [UInt64]
        var pauseNanos: UInt64?
        var unwindNanos: UInt64?
        var error: String?
        var probe: ThreadProbe?
        var lockOwner: Int32?
    }

    let configuration: StallWatchConfiguration
    let loopName: String
    /// What is watched and how it is sampled (this process by signal, or another one by ptrace).
    let target: Target
    /// The configured mode, for final reports.
    let symbolicator: Symbolicator
    /// Names only (no DWARF line tables, whose first load can take tens of ms), for the provisional report
    /// that must be on disk within a few ms of detection.
    let quickSymbolicator: Symbolicator
    let writer: ReportWriter
    let emit: @Sendable (StallEvent) -> Void
    /// Problems met when the recorder was built (no free signal, …), repeated in every report.
    let setupErrors: [String]
    var pid: Int32 { target.processID }

    // The stall being followed.
    var stall: StallDetector.Stall?
    var thread: SampledThread?
    var annotations: [String: String] = [:]
    var samples: [RawSample] = []
    var captureErrors: [String] = []
    var notes: [String] = []
    var reportID = ""
    var wallAtBegin: UInt64 = 0
    var monoAtBegin: UInt64 = 0
    var firstProbe: ThreadProbe?
    var contextProbe: SystemContextProbe?
    /// A thread of the snapshot with its stack still as raw addresses (symbolicated with the report).
    struct RawThread {
        var snapshot: StallReport.ThreadSnapshot
        var addresses: [UInt64] = []
    }
    var threadSnapshot: [RawThread] = []
    var intervalNanos: UInt64 = 0
    var deduplicator: StallDeduplicator
    /// When the next sample of the followed stall is due (CLOCK_MONOTONIC), nil when none is.
    public private(set) var nextSampleAt: UInt64?
    private static let counter = Counter()

    /// A recorder for a loop of this process, sampled by signal.
    convenience init(
        configuration: StallWatchConfiguration, loopName: String, emit: @escaping @Sendable (StallEvent) -> Void
    ) {
        self.init(configuration: configuration, loopName: loopName, target: .inProcess(), emit: emit)
    }

    /// A recorder for `target`'s loop.
    ///
    /// - Parameters:
    ///   - configuration: Thresholds, sampling, symbolication and report settings.
    ///   - loopName: The loop's name in reports.
    ///   - target: The process, how it is sampled and how its stalls were detected.
    ///   - emit: Called for every stall event on the calling thread.
    public init(
        configuration: StallWatchConfiguration, loopName: String, target: Target,
        emit: @escaping @Sendable (StallEvent) -> Void
    ) {
        self.configuration = configuration
        self.loopName = loopName
        self.target = target
        self.emit = emit
        let errors = target.setupErrors
        symbolicator = Symbolicator(processID: target.processID, mode: configuration.symbolication)
        quickSymbolicator =
            configuration.symbolication == .full
            ? Symbolicator(processID: target.processID, mode: .fast) : symbolicator
        let directory =
            configuration.reportDirectoryPath
        writer = ReportWriter(directory: directory, maxReports: configuration.maxReports)
        deduplicator = StallDeduplicator(
            windowNanos: UInt64(configuration.dedupWindowMs) * 1_000_000, maxPerHour: configuration.maxReportsPerHour)
        setupErrors = errors
    }

    public var isFollowing: Bool { stall != nil }

    /// Pays the symbolicator's set-up (mappings, libdwfl session, symbol tables of the images) when the watchdog
    /// starts, on its thread, rather than at the first stall, where it would delay the provisional report and
    /// the first samples.
    func warmUp() {
        let here = UInt64(
            UInt(bitPattern: unsafeBitCast(sw_monotonic_ns as @convention(c) () -> UInt64, to: UnsafeRawPointer.self)))
        _ = quickSymbolicator.symbolicate([here])
    }

    // MARK: Lifecycle of one stall

    /// A stall began on thread `threadID` of the target (detected at `now`, CLOCK_MONOTONIC): first sample, all
    /// threads' state, provisional report.
    public func begin(_ stall: StallDetector.Stall, threadID: Int32, annotations: [String: String] = [:], now: UInt64) {
        begin(
            stall, thread: SampledThread(threadID: threadID, stackLow: 0, stackHigh: 0), annotations: annotations,
            now: now)
    }

    func begin(_ stall: StallDetector.Stall, thread: SampledThread?, annotations: [String: String], now: UInt64) {
        self.stall = stall
        self.thread = thread
        self.annotations = annotations
        samples = []
        captureErrors = []
        notes = stall.notes
        wallAtBegin = sw_realtime_ns()
        monoAtBegin = now
        reportID = Self.makeID(wallNanos: wallAtBegin)
        intervalNanos = UInt64(configuration.sampleIntervalMs) * 1_000_000
        if let tid = thread?.threadID {
            firstProbe = ThreadProbe.read(pid: pid, tid: tid)
            contextProbe = SystemContextProbe(pid: pid, loopThreadID: tid, monotonicNanos: now)
            if let status = ProcFile.text("/proc/\(pid)/status"),
                let tracer = ProcFile.statusField(status, "TracerPid"),
                tracer != "0"
            {
                notes.append(
                    "a tracer (debugger) is attached to the process (TracerPid \(tracer)): pauses may be its doing")
            }
        }
        takeSample(now: now, announce: false)
        threadSnapshot = snapshotThreads()
        // Annealing: a stall that looks like one reported recently is sampled less often.
        let firstSignature = StallSignature.compute(stack: quickSymbolicator.symbolicate(samples[0].addresses))
        let scale = deduplicator.samplingScale(signature: firstSignature, now: now)
        if scale > 1 {
            intervalNanos *= scale
            nextSampleAt = now &+ intervalNanos
            notes.append("sampled every \(intervalNanos / 1_000_000) ms: this stall signature was seen recently")
        }
        if let report = write(status: .ongoing, endNanos: nil, final: false) { emit(.began(report)) }
        emit(.sampled(reportID: reportID, index: 0, pauseMicros: samples[0].pauseNanos.map(Self.micros)))
    }

    /// Takes a sample if one is due; returns true if it did.
    @discardableResult
    public func sampleIfDue(now: UInt64) -> Bool {
        guard let due = nextSampleAt, now >= due else { return false }
        takeSample(now: now)
        return true
    }

    public func escalate(_ stall: StallDetector.Stall) {
        self.stall = stall
        if let report = write(status: .ongoing, endNanos: nil, final: false) { emit(.escalated(report)) }
    }

    public func end(endNanos: UInt64) {
        guard stall != nil else { return }
        if let report = finish(status: .ended, endNanos: endNanos, now: endNanos) { emit(.ended(report)) }
        reset()
    }

    /// The watchdog is stopping while the loop is still stuck (`reason` replaces the default note).
    public func abandon(now: UInt64, reason: String? = nil) {
        guard stall != nil else { return }
        notes.append(reason ?? "the watchdog stopped while the loop was still stuck")
        if let report = finish(status: .unrecovered, endNanos: nil, now: now) { emit(.ended(report)) }
        reset()
    }

    public func addNote(_ note: String) {
        if stall != nil { notes.append(note) }
    }

    private func reset() {
        stall = nil
        thread = nil
        samples = []
        threadSnapshot = []
        firstProbe = nil
        contextProbe = nil
        nextSampleAt = nil
    }

    // MARK: Sampling

    private func takeSample(now: UInt64, announce: Bool = true) {
        guard let stall else { return }
        nextSampleAt = samples.count + 1 < configuration.maxSamples ? now &+ intervalNanos : nil
        var sample = RawSample(offsetNanos: now &- stall.startNanos, addresses: [])
        guard let thread else {
            sample.error = "the loop thread is unknown"
            samples.append(sample)
            return
        }
        if let sampler = target.sampler {
            let taken = sampler.sample(thread, configuration: configuration)
            sample.addresses = taken.addresses
            sample.pauseNanos = taken.pauseNanos
            sample.unwindNanos = taken.unwindNanos
            sample.error = taken.error
            if let failure = taken.failure { captureErrors.append("sample \(samples.count): \(failure)") }
        } else {
            sample.error = "no sampler"
        }
        sample.probe = ThreadProbe.read(pid: pid, tid: thread.threadID)
        if let probe = sample.probe, probe.syscallKind == .lock, let address = probe.syscallArg0 {
            sample.lockOwner =
                LockOwner.owner(
                    pid: pid, futexAddress: address, threads: Set(ThreadProbe.threadIDs(pid: pid)))?.threadID
        }
        samples.append(sample)
        if announce {
            emit(
                .sampled(reportID: reportID, index: samples.count - 1, pauseMicros: sample.pauseNanos.map(Self.micros)))
        }
    }

    /// Every other thread's state, wait target and stack at the first sample, bounded by `maxThreads` (the loop
    /// thread first, then by thread id). The watchdog's own thread is left out.
    private func snapshotThreads() -> [RawThread] {
        guard configuration.maxThreads > 0 else { return [] }
        let me = pid == getpid() ? sw_gettid() : 0
        let loopTID = thread?.threadID
        let tids = ThreadProbe.threadIDs(pid: pid).filter { $0 != me }
        let ordered = tids.filter { $0 == loopTID } + tids.filter { $0 != loopTID }
        let all = Set(tids)
        var result: [RawThread] = []
        for tid in ordered.prefix(configuration.maxThreads) {
            guard let probe = ThreadProbe.read(pid: pid, tid: tid) else { continue }
            var addresses: [UInt64] = []
            var snapshot = StallReport.ThreadSnapshot(
                threadId: tid, name: probe.name, state: probe.state, wchan: probe.wchan, syscall: probe.syscallName)
            if probe.syscallKind == .lock, let address = probe.syscallArg0 {
                snapshot.waitAddress = address
                snapshot.waitingForThreadId = LockOwner.owner(pid: pid, futexAddress: address, threads: all)?.threadID
            }
            if tid == loopTID, let first = samples.first {
                addresses = first.addresses
                snapshot.error = first.error
            } else if let sampler = target.sampler {
                let taken = sampler.sampleThread(id: tid, configuration: configuration)
                addresses = taken.addresses
                snapshot.error = taken.error
            }
            result.append(RawThread(snapshot: snapshot, addresses: addresses))
        }
        return result
    }

    // MARK: Identity and units

    static func millis(_ nanos: UInt64) -> Double { (Double(nanos) / 1e4).rounded() / 100 }
    static func micros(_ nanos: UInt64) -> Double { (Double(nanos) / 10).rounded() / 100 }

    /// `20261130T221500.123Z-4242-3`: sortable, unique per process.
    static func makeID(wallNanos: UInt64) -> String {
        var t = time_t(wallNanos / 1_000_000_000)
        var tm = tm()
        gmtime_r(&t, &tm)
        let stamp = String(
            format: "%04d%02d%02dT%02d%02d%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
            tm.tm_min, tm.tm_sec, Int(wallNanos / 1_000_000 % 1000))
        return "\(stamp)-\(getpid())-\(counter.next())"
    }
}

/// A process-wide counter for report ids.
final class Counter: @unchecked Sendable {
    // @unchecked Sendable: `value` is read and written only under `lock`.
    private let lock = NSLock()
    private var value = 0
    func next() -> Int {
        lock.lock()
        defer { lock.unlock() }
        value += 1
        return value
    }
}
