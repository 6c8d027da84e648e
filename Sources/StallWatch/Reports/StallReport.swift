// The stall report: one JSON document per stall, the same schema for every capture path.
import Foundation

/// Everything StallWatch knows about one stall of a watched loop.
///
/// Encoded as JSON (camelCase keys) by ``ReportWriter``; the schemas are published in `Config/`
/// (`stall-report-2.schema.json` for the files this build writes, `stall-report.schema.json` for version 1,
/// which it still reads) and versioned by ``schemaVersion``. Both versions decode to this one model. Addresses, offsets and load bases are
/// `UInt64` in memory and hexadecimal strings (`"0x7f3a…"`) in JSON, so that 64-bit values survive JSON readers
/// that use doubles (`ReportAddressCoding.swift` converts).
public struct StallReport: Codable, Sendable, Equatable {
    /// The schema version this build writes. Readers skip documents with a larger version.
    static let currentSchemaVersion = 2

    public enum Status: String, Codable, Sendable, CaseIterable {
        /// Written at detection; the stall had not ended when the file was written.
        case ongoing
        /// The loop moved on; `endedAt` and `durationMs` are exact.
        case ended
        /// The process ended (or the watcher stopped) while the loop was still stuck.
        case unrecovered
        /// Not a stall after all: a watcher that started during the wait judged it busy from what it was, and the
        /// loop then came back to that same wait after doing work — it is the loop's idle wait. The provisional
        /// report is kept, marked so, with a note saying why; `endedAt` is when the loop left the wait.
        case withdrawn
        /// Not a stall: the loop's lead-up written on demand (``Watchdog/snapshot(reason:)``, or `stallwatch snapshot`
        /// from outside), with `snapshotReason`; `startedAt` and `endedAt` are when it was taken, `durationMs` 0.
        case snapshot
    }

    public enum Severity: String, Codable, Sendable, CaseIterable {
        /// Longer than `thresholdMs`.
        case stall
        /// Longer than `hangThresholdMs`.
        case hang
    }

    /// ``currentSchemaVersion`` for every report in memory, whichever version its file had.
    package var schemaVersion: Int
    /// Unique per report: time, pid and a per-process counter (`20261130T221500.123Z-4242-3`).
    public var id: String
    public var status: Status
    public var severity: Severity
    /// When the loop entered the phase it got stuck in (wall clock).
    public var startedAt: Date
    /// When the loop left it; nil while `ongoing` or `unrecovered`.
    public var endedAt: Date?
    /// Exact for `ended` reports; the time stuck so far otherwise.
    public var durationMs: Double
    package var detection: Detection
    package var process: ProcessDescription
    public var loop: LoopDescription
    package var samples: [Sample]
    /// The images (executable and shared objects) that any frame points into.
    package var images: [ImageInfo]
    /// A hash of image + offset of the top frames of the dominant stack: stable across ASLR and hosts.
    public var signature: String
    package var capture: CaptureSummary
    /// Facts that qualify the report (late watchdog wake-up, process stopped, …), one sentence each.
    public var notes: [String]
    /// Key/values the service attached to the loop work that stalled.
    public var annotations: [String: String]
    /// What kind of stall this was and why StallWatch thinks so.
    public var cause: Cause?
    /// The samples merged into a tree by function (outermost frames at the roots), with counts.
    package var callTree: [CallTree.Node]?
    /// The dominant stack: the one most samples share (stacks of one frame are never chosen).
    public var pointStack: PointStack?
    /// Every thread of the process on the first sample (bounded), to see who holds what the loop waits for.
    package var threads: [ThreadSnapshot]?
    /// The process and machine during the stall: CPU use, load, throttling.
    package var context: SystemContext?
    /// Stalls with this signature folded into this report (1 for a report of its own).
    public var occurrences: Int?
    package var firstSeen: Date?
    package var lastSeen: Date?
    /// With `occurrences` > 1: the longest of the folded stalls, and all of them together, milliseconds
    /// (`durationMs` stays this report's own stall).
    package var maxDurationMs: Double?
    /// True when the stall was already under way when watching began (a watcher started mid-incident):
    /// `startedAt` is then only the latest it can have begun — from the thread's own kernel figures where they
    /// tell, else the first look — and `durationMs` a lower bound. Absent otherwise.
    package var startedBeforeAttach: Bool?
    package var totalDurationMs: Double?
    /// The Swift task of a stall on the Concurrency pool.
    package var task: TaskDescription?
    /// The pool's workers, for a stall whose cause is `saturated`.
    package var pool: PoolDescription?
    /// What a suspended task waits for, for a report whose cause is `hungAwait`.
    package var hungAwait: HungAwaitDescription?
    /// Whether every frame's file:line has been looked up (`lines` `pending` until a final report's rewrite
    /// fills them in); nil when the report does not look up lines (symbolication `fast` or `off`).
    package var symbolication: SymbolicationState?
    /// What the loop ran in the seconds before the stall was detected; nil when no lead-up was recorded (a loop
    /// other than ``EventLoop``, the sidecar's reports, `leadUp` off).
    package var leadUp: LeadUp?
    /// Why a `snapshot` report was written: the reason given to ``Watchdog/snapshot(reason:)``, or the request from
    /// outside. Set on snapshots only.
    public var snapshotReason: String?

    package init(
        schemaVersion: Int = StallReport.currentSchemaVersion, id: String, status: Status, severity: Severity,
        startedAt: Date, endedAt: Date?, durationMs: Double, detection: Detection, process: ProcessDescription,
        loop: LoopDescription, samples: [Sample], images: [ImageInfo], signature: String, capture: CaptureSummary,
        notes: [String] = [], annotations: [String: String] = [:]
    ) {
        self.schemaVersion = schemaVersion
        self.id = id
        self.status = status
        self.severity = severity
        self.startedAt = startedAt
        self.endedAt = endedAt
        self.durationMs = durationMs
        self.detection = detection
        self.process = process
        self.loop = loop
        self.samples = samples
        self.images = images
        self.signature = signature
        self.capture = capture
        self.notes = notes
        self.annotations = annotations
    }
}

extension StallReport {
    /// Set this `userInfo` key to `true` on a decoder to read reports for listing: the heavy parts (`threads`,
    /// `callTree`, `images`, and every sample's frames but those of the first sample that has any) are skipped,
    /// so a directory of thousands of reports lists quickly. Samples keep their count and offsets.
    package static let listingDecodeKey = CodingUserInfoKey(rawValue: "StallWatch.listing")!

    enum CodingKeys: String, CodingKey {
        case schemaVersion, id, status, severity, startedAt, endedAt, durationMs, detection, process, loop, samples
        case images, signature, capture, notes, annotations, cause, callTree, pointStack, threads, context
        case occurrences, firstSeen, lastSeen, maxDurationMs, totalDurationMs, task, pool, symbolication, leadUp
        case hungAwait
        case startedBeforeAttach, snapshotReason
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let listing = decoder.userInfo[Self.listingDecodeKey] as? Bool == true
        if try c.decode(Int.self, forKey: .schemaVersion) >= 2 {
            self = try StallReport(version2From: decoder, listing: listing)
            try validate()
            return
        }
        schemaVersion = Self.currentSchemaVersion
        id = try c.decode(String.self, forKey: .id)
        status = try c.decode(Status.self, forKey: .status)
        severity = try c.decode(Severity.self, forKey: .severity)
        startedAt = try c.decode(Date.self, forKey: .startedAt)
        endedAt = try c.decodeIfPresent(Date.self, forKey: .endedAt)
        durationMs = try c.decode(Double.self, forKey: .durationMs)
        detection = try c.decode(Detection.self, forKey: .detection)
        process = try c.decode(ProcessDescription.self, forKey: .process)
        loop = try c.decode(LoopDescription.self, forKey: .loop)
        signature = try c.decode(String.self, forKey: .signature)
        capture = try c.decode(CaptureSummary.self, forKey: .capture)
        notes = try c.decode([String].self, forKey: .notes)
        annotations = try c.decode([String: String].self, forKey: .annotations)
        cause = try c.decodeIfPresent(Cause.self, forKey: .cause)
        pointStack = try c.decodeIfPresent(PointStack.self, forKey: .pointStack)
        context = try c.decodeIfPresent(SystemContext.self, forKey: .context)
        occurrences = try c.decodeIfPresent(Int.self, forKey: .occurrences)
        firstSeen = try c.decodeIfPresent(Date.self, forKey: .firstSeen)
        lastSeen = try c.decodeIfPresent(Date.self, forKey: .lastSeen)
        maxDurationMs = try c.decodeIfPresent(Double.self, forKey: .maxDurationMs)
        startedBeforeAttach = try c.decodeIfPresent(Bool.self, forKey: .startedBeforeAttach)
        totalDurationMs = try c.decodeIfPresent(Double.self, forKey: .totalDurationMs)
        task = try c.decodeIfPresent(TaskDescription.self, forKey: .task)
        pool = try c.decodeIfPresent(PoolDescription.self, forKey: .pool)
        hungAwait = try c.decodeIfPresent(HungAwaitDescription.self, forKey: .hungAwait)
        symbolication = try c.decodeIfPresent(SymbolicationState.self, forKey: .symbolication)
        snapshotReason = try c.decodeIfPresent(String.self, forKey: .snapshotReason)
        if listing {
            var list = try c.nestedUnkeyedContainer(forKey: .samples)
            var kept: [Sample] = []
            var haveFrames = false
            while !list.isAtEnd {
                if haveFrames {
                    let head = try list.decode(SampleHead.self)
                    kept.append(Sample(offsetMs: head.offsetMs, frames: []))
                } else {
                    let sample = try list.decode(Sample.self)
                    haveFrames = !sample.frames.isEmpty
                    kept.append(sample)
                }
            }
            samples = kept
            images = []
        } else {
            samples = try c.decode([Sample].self, forKey: .samples)
            images = try c.decode([ImageInfo].self, forKey: .images)
            callTree = try c.decodeIfPresent([CallTree.Node].self, forKey: .callTree)
            threads = try c.decodeIfPresent([ThreadSnapshot].self, forKey: .threads)
            leadUp = try c.decodeIfPresent(LeadUp.self, forKey: .leadUp)
        }
        try validate()
    }

    /// A sample's offset alone: what listing keeps of the samples after the first with frames.
    private struct SampleHead: Decodable {
        var offsetMs: Double
    }
}

extension StallReport {
    /// How the stall was noticed.
    package struct Detection: Codable, Sendable, Equatable {
        /// `in-process` (embedded watchdog), `heartbeat` (sidecar reading the heartbeat segment), `proc`
        /// (from /proc evidence, without instrumentation) or `concurrency-pool`.
        package var source: DetectionSource
        /// `deadline` (the default) or `classic` (signal per transition, N consecutive timeouts).
        package var strategy: DetectionStrategy
        package var thresholdMs: Double
        package var hangThresholdMs: Double
        /// When the watchdog saw the threshold crossed (wall clock).
        package var detectedAt: Date
        /// Detection time minus the moment the threshold was crossed.
        package var latencyMs: Double

        package init(
            source: DetectionSource, strategy: DetectionStrategy, thresholdMs: Double, hangThresholdMs: Double,
            detectedAt: Date,
            latencyMs: Double
        ) {
            self.source = source
            self.strategy = strategy
            self.thresholdMs = thresholdMs
            self.hangThresholdMs = hangThresholdMs
            self.detectedAt = detectedAt
            self.latencyMs = latencyMs
        }
    }

    package struct ProcessDescription: Codable, Sendable, Equatable {
        package var pid: Int32
        package var executable: String
        package var buildId: String?
        package var host: String

        package init(pid: Int32, executable: String, buildId: String?, host: String) {
            self.pid = pid
            self.executable = executable
            self.buildId = buildId
            self.host = host
        }
    }

    public struct LoopDescription: Codable, Sendable, Equatable {
        public var name: String
        public var threadId: Int32
        /// The activity the loop was stuck after (`beforeSources`, `afterWaiting`, …).
        public var phase: String
        /// The loop iteration (transition sequence) that stalled.
        package var iteration: UInt64

        package init(name: String, threadId: Int32, phase: String, iteration: UInt64) {
            self.name = name
            self.threadId = threadId
            self.phase = phase
            self.iteration = iteration
        }
    }

    /// One backtrace of the loop thread, taken while it was stuck.
    package struct Sample: Codable, Sendable, Equatable {
        /// Milliseconds from `startedAt` to the capture of this sample's stack.
        package var offsetMs: Double
        /// Innermost frame first.
        package var frames: [StackFrame]
        /// How long the loop thread was paused for this sample (signal sent → copy done), in microseconds.
        package var pauseMicros: Double?
        /// Why this sample has no (or a partial) stack, e.g. "handler did not run within 100 ms (state D)".
        package var error: String?
        /// The loop thread's kernel-side state when the sample was taken.
        package var thread: ThreadState?

        package init(
            offsetMs: Double, frames: [StackFrame], pauseMicros: Double? = nil, error: String? = nil,
            thread: ThreadState? = nil
        ) {
            self.offsetMs = offsetMs
            self.frames = frames
            self.pauseMicros = pauseMicros
            self.error = error
            self.thread = thread
        }
    }

    /// What capturing the samples cost, and what went wrong on the way.
    package struct CaptureSummary: Codable, Sendable, Equatable {
        /// `ptrace-helper` or `signal` (in-process), `ptrace` (sidecar), `none`.
        package var method: CaptureMethod
        package var sampleIntervalMs: Double
        package var samplesTaken: Int
        package var samplesFailed: Int
        /// Loop-thread pause per sample, median and max, microseconds.
        package var pauseMicrosMedian: Double?
        package var pauseMicrosMax: Double?
        /// Unwinding the copied stacks, per sample median, microseconds.
        package var unwindMicrosMedian: Double?
        /// Symbolicating all frames of the report, total, microseconds.
        package var symbolicationMicros: Double?
        /// One line per problem met while capturing (unreadable page, timeout, truncated stack …).
        package var errors: [String]

        package init(
            method: CaptureMethod, sampleIntervalMs: Double, samplesTaken: Int = 0, samplesFailed: Int = 0,
            pauseMicrosMedian: Double? = nil, pauseMicrosMax: Double? = nil, unwindMicrosMedian: Double? = nil,
            symbolicationMicros: Double? = nil, errors: [String] = []
        ) {
            self.method = method
            self.sampleIntervalMs = sampleIntervalMs
            self.samplesTaken = samplesTaken
            self.samplesFailed = samplesFailed
            self.pauseMicrosMedian = pauseMicrosMedian
            self.pauseMicrosMax = pauseMicrosMax
            self.unwindMicrosMedian = unwindMicrosMedian
            self.symbolicationMicros = symbolicationMicros
            self.errors = errors
        }
    }
}

extension StallReport {
    /// A thread's state as `/proc/<pid>/task/<tid>/` showed it.
    package struct ThreadState: Codable, Sendable, Equatable {
        /// R running, S sleeping, D disk sleep, T stopped, t tracing stop …
        package var state: String
        package var wchan: String?
        /// The system call's name, absent when running in user space.
        package var syscall: String?
        var syscallNumber: Int?
        /// CPU time the thread used since the stall began, milliseconds.
        package var cpuTimeMs: Double
        var voluntarySwitches: UInt64
        var involuntarySwitches: UInt64
        /// Time runnable but waiting for a CPU since the stall began, milliseconds.
        var runQueueWaitMs: Double

        package init(
            state: String, wchan: String?, syscall: String?, syscallNumber: Int?, cpuTimeMs: Double,
            voluntarySwitches: UInt64, involuntarySwitches: UInt64, runQueueWaitMs: Double
        ) {
            self.state = state
            self.wchan = wchan
            self.syscall = syscall
            self.syscallNumber = syscallNumber
            self.cpuTimeMs = cpuTimeMs
            self.voluntarySwitches = voluntarySwitches
            self.involuntarySwitches = involuntarySwitches
            self.runQueueWaitMs = runQueueWaitMs
        }
    }

    public struct PointStack: Codable, Sendable, Equatable {
        /// Innermost first, as in samples.
        public var frames: [StackFrame]
        /// Samples that had exactly this stack.
        public var count: Int

        package init(frames: [StackFrame], count: Int) {
            self.frames = frames
            self.count = count
        }
    }

    /// One thread of the process at the first sample.
    package struct ThreadSnapshot: Codable, Sendable, Equatable {
        package var threadId: Int32
        package var name: String
        package var state: String
        package var wchan: String?
        package var syscall: String?
        /// The futex word's address when the thread waits in `futex` (hex in JSON).
        package var waitAddress: UInt64?
        /// The owner of the glibc mutex the thread waits for, when it could be read.
        package var waitingForThreadId: Int32?
        /// Innermost first; empty when the stack could not be captured (see `error`).
        package var frames: [StackFrame]
        package var error: String?

        package init(
            threadId: Int32, name: String, state: String, wchan: String? = nil, syscall: String? = nil,
            waitAddress: UInt64? = nil, waitingForThreadId: Int32? = nil, frames: [StackFrame] = [],
            error: String? = nil
        ) {
            self.threadId = threadId
            self.name = name
            self.state = state
            self.wchan = wchan
            self.syscall = syscall
            self.waitAddress = waitAddress
            self.waitingForThreadId = waitingForThreadId
            self.frames = frames
            self.error = error
        }
    }

    /// The process and the machine while the loop was stuck.
    package struct SystemContext: Codable, Sendable, Equatable {
        /// The whole process's CPU use during the stall, percent of one CPU.
        package var processCpuPercent: Double?
        /// The loop thread's CPU use during the stall, percent of one CPU.
        package var loopCpuPercent: Double?
        /// /proc/loadavg at the end: 1, 5 and 15 minutes.
        package var loadAverage: [Double]?
        package var cpuCount: Int?
        /// cgroup `cpu.stat` (v2, or v1's cpu controller): periods throttled and time throttled during the stall.
        var cgroupThrottledPeriods: UInt64?
        package var cgroupThrottledMs: Double?
        /// Steal time during the stall, percent of all CPU time (a starved virtual machine).
        package var stealPercent: Double?
        /// The busiest disk during the stall: the share of the time it was doing I/O, percent.
        package var diskBusyPercent: Double?
        /// MiB that disk read and wrote during the stall, every process's.
        package var diskMiB: Double?
        /// MiB of storage I/O the process itself caused during the stall (`/proc/PID/io`; up to its last reading
        /// when it exited meanwhile).
        package var processDiskMiB: Double?

        package init(
            processCpuPercent: Double? = nil, loopCpuPercent: Double? = nil, loadAverage: [Double]? = nil,
            cpuCount: Int? = nil, cgroupThrottledPeriods: UInt64? = nil, cgroupThrottledMs: Double? = nil,
            stealPercent: Double? = nil, diskBusyPercent: Double? = nil, diskMiB: Double? = nil,
            processDiskMiB: Double? = nil
        ) {
            self.diskBusyPercent = diskBusyPercent
            self.diskMiB = diskMiB
            self.processDiskMiB = processDiskMiB
            self.processCpuPercent = processCpuPercent
            self.loopCpuPercent = loopCpuPercent
            self.loadAverage = loadAverage
            self.cpuCount = cpuCount
            self.cgroupThrottledPeriods = cgroupThrottledPeriods
            self.cgroupThrottledMs = cgroupThrottledMs
            self.stealPercent = stealPercent
        }
    }
}

extension StallReport {
    /// `nanoseconds` as a report's milliseconds (`durationMs`, `offsetMs` …): two decimals. The one place the
    /// report turns StallWatch's nanoseconds into its units.
    package static func milliseconds(_ nanoseconds: UInt64) -> Double { (Double(nanoseconds) / 1e4).rounded() / 100 }

    /// `nanoseconds` as a report's microseconds (`pauseMicros` …): two decimals.
    static func microseconds(_ nanoseconds: UInt64) -> Double { (Double(nanoseconds) / 10).rounded() / 100 }
}
