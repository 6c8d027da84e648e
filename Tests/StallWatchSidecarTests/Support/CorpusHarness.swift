// Running one program nobody here wrote under the sidecar and judging what it reported.
import Foundation
import StallWatch
import StallWatchTestSupport
import Testing

@testable import StallWatchSidecar

#if canImport(Glibc)
    import Glibc
#endif

/// One stall (or none) of a third-party program, and what a right diagnosis says about it.
struct CorpusCase: Sendable, CustomTestStringConvertible {
    /// What a right report says.
    enum Expectation: Sendable {
        /// An idle or healthy loop: no report but the machine's own (``StallReport/Cause/isStarvedByTheMachine``).
        case noReport
        /// One report with this cause, one of `frames` among the point stack's top frames (symbol substrings;
        /// empty: not checked), and the blocking thread by name when there is one.
        case stall(StallReport.Cause.Kind, frames: [String], blocking: String? = nil, deadlock: Bool = false)
        /// At least one report, every one with this cause.
        case every(StallReport.Cause.Kind)
        /// No report that blames the loop: none, or only `starved` ones (the machine was busy).
        case noBlame
    }

    let name: String
    let command: [String]
    let expect: Expectation
    var thresholdMs = 250
    var topFrames = 4
    /// A sentence the cause's evidence must contain (substring).
    var evidenceContains: String?
    /// The command name `cause.blockingProcess` must name (another process the loop waited on), with the state
    /// of one of its threads.
    var blockingProcess: String?
    /// The command name of the first candidate holder that is another process, a `likely` one.
    var candidateProcess: String?
    /// The thread name of the first candidate holder, a `likely` one, a thread of the watched process.
    var candidateThread: String?
    /// A line the report's `capture.errors` must contain (substring).
    var captureErrorsContain: String?
    /// Symbol substrings each of which some frame of the point stack must contain (deeper than `topFrames`).
    var pointStackContains: [String] = []
    /// The most frames the point stack may have, each in a mapped image (nothing guessed past where unwinding ends).
    var pointStackAtMost: Int?
    /// The symbol (substring) of the point stack's one frame of kind `stackSwitch`, the first past a stack switch.
    var stackSwitchAt: String?
    /// A point-stack frame (symbol substring) and the end of the source file its file:line must name.
    var sourceFile: (symbol: String, file: String)?
    /// Variables set for the program.
    var environment: [String: String] = [:]
    /// Where the report directory is made; nil: the temporary directory.
    var reportParent: String?
    /// CPU hogs started next to the target (each spinning on CPU 0 at nice 10, where the target is pinned too),
    /// so that the rest of the suite, at nice 0, still gets its CPU.
    var competingSpinners = 0
    /// Watch the target's main thread for ptrace (TracerPid, a tracing stop) every millisecond while it runs.
    var monitorTracing = false

    var testDescription: String { name }
}

enum CorpusHarness {
    static func fixture(_ name: String) -> String {
        SidecarFixtures.fixturesDirectory.appendingPathComponent("corpus").appendingPathComponent(name).path
    }

    /// What one run of a case left: its reports, the events the watcher sent (one line each), what the program
    /// printed on standard error.
    struct Observation {
        var reports: [StallReport]
        var events: [String]
        var targetStderr: String
        var targetStdout = ""
        /// With `monitorTracing`: the spans (CLOCK_REALTIME nanoseconds, first and last look) over which every
        /// look saw the main thread traced or in a tracing stop, and when the watcher told each stall's end, by
        /// report id.
        var tracedSpans: [(first: UInt64, last: UInt64)] = []
        var endedAt: [String: UInt64] = [:]
    }

    /// Spawns the program, waits for READY, watches it from /proc until it exits, and checks the reports.
    static func check(_ c: CorpusCase) throws {
        try judge(c, observe(c))
    }

    /// Spawns the program, waits for READY and watches it from /proc until it exits; checks that it exited well
    /// and was never left stopped or traced.
    static func observe(_ c: CorpusCase) throws -> Observation {
        let directory =
            c.reportParent.map { "\($0)/stallwatch-corpus-\(UUID().uuidString.prefix(8))" }
            ?? SidecarFixtures.temporaryDirectory("corpus-\(c.name)")
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let spinners = try (0..<c.competingSpinners).map { _ in
            try Spawned(
                "/usr/bin/nice", ["-n", "10", "/usr/bin/taskset", "-c", "0", "/bin/sh", "-c", "while :; do :; done"])
        }
        defer { spinners.forEach { kill($0.pid, SIGKILL) } }
        let target = try Spawned(c.command[0], Array(c.command.dropFirst()), environment: c.environment)
        defer { unlink("/tmp/perf-\(target.pid).map") }  // a JIT runtime's symbol map, when asked for
        try #require(target.waitFor("READY"), "\(c.name) did not start: \(target.stderr)")
        var configuration = StallWatchConfiguration()
        configuration.reportDirectory = directory
        configuration.thresholdMs = c.thresholdMs
        var options = TargetWatcher.Options(pid: target.pid, configuration: configuration)
        options.thresholdFixed = true
        options.mode = .proc
        let monitor = c.monitorTracing ? TracingMonitor(pid: target.pid) : nil
        let endedAt = Locked<[String: UInt64]>([:])
        let (watcher, events, done, badStates) = try SidecarIntegrationTests.watch(options) { event in
            if case .stall(.ended(let report)) = event {
                endedAt.withLock { $0[report.id] = $0[report.id] ?? TracingMonitor.now() }
            }
        }
        let status = target.wait(timeout: .seconds(40))
        monitor?.stop()
        watcher.stop()
        #expect(done.wait(timeout: .now() + 10) == .success)
        #expect(status == 0, "\(c.name) exited with \(String(describing: status)): \(target.stderr)")
        #expect(badStates.withLock { $0 }.isEmpty, "target stopped or traced: \(badStates.withLock { $0 })")
        return Observation(
            reports: SidecarFixtures.reports(in: directory), events: events.withLock { $0.map(Self.line) },
            targetStderr: target.stderr, targetStdout: target.stdout, tracedSpans: monitor?.spans ?? [],
            endedAt: endedAt.withLock { $0 })
    }

    /// One event as a short line for a failure's message.
    static func line(_ event: SidecarEvent) -> String {
        switch event {
        case .stall(.began(let report)): return "began \(report.id)"
        case .stall(.ended(let report)):
            return "ended \(report.id) \(report.status) \(report.cause?.kind.rawValue ?? "-") \(report.durationMs) ms"
        case .stall(.sampled(let id, let index, _)): return "sampled \(id) #\(index)"
        default: return String(String(describing: event).prefix(160))
        }
    }

    /// Checks the reports of one run against what a right diagnosis says.
    static func judge(_ c: CorpusCase, _ seen: Observation) throws {
        let reports = seen.reports
        switch c.expect {
        case .noReport:
            // A loaded machine may hold even an idle loop up (off the CPU, or faulting in a page behind other
            // processes' disk I/O): `starved` with that evidence blames nothing in the program. Any other report does.
            let blamed = reports.filter { $0.cause?.isStarvedByTheMachine != true }
            #expect(blamed.isEmpty, "an idle or healthy loop was blamed: \(blamed.map(describe))")
        case .noBlame:
            #expect(reports.allSatisfy { $0.cause?.kind == .starved }, "the loop was blamed: \(reports.map(describe))")
        case .every(let cause):
            #expect(!reports.isEmpty)
            #expect(reports.allSatisfy { $0.cause?.kind == cause }, "\(reports.map(describe))")
        case .stall(let cause, let frames, let blocking, let deadlock):
            // Besides the stall, a loaded machine may hold the loop off the CPU long enough for a report of its
            // own: `starved`, with the run queue as evidence, is the documented verdict for that and blames
            // nothing in the program. So does a moment the report names no code or call for — cause `unknown`, no
            // frame in its point stack — two thresholds or more apart from every other report (begun that long
            // after it ended, or ended that long before it began): the loop turned in between, so it is no part of
            // the stall (a stall's start is dated at the last progress seen, so a split's parts meet: its tail
            // begins where its head ends). Any other extra report is a split or a false stall.
            let blaming = reports.blamingTheProgram(expecting: cause)
            let stalls = blaming.filter { report in
                guard report.cause?.kind == .unknown, report.pointStack?.frames.isEmpty ?? true else { return true }
                let gap = TimeInterval(2 * c.thresholdMs) / 1000
                return blaming.contains { other in
                    let after = report.startedAt >= (other.endedAt ?? .distantFuture).addingTimeInterval(gap)
                    let before = (report.endedAt ?? .distantFuture).addingTimeInterval(gap) <= other.startedAt
                    return other.id != report.id && !after && !before
                }
            }
            try #require(
                stalls.count == 1,
                """
                expected one report, found \(reports.count): \(reports.map(describe)); events \(seen.events); \
                the service's stderr ends: \(seen.targetStderr.suffix(600))
                """
            )
            let report = stalls[0]
            #expect(report.cause?.matches(cause) == true, "\(describe(report))")
            let top = (report.pointStack?.frames ?? []).prefix(c.topFrames).compactMap(\.symbol)
            if !frames.isEmpty {
                #expect(
                    top.contains { symbol in frames.contains { symbol.contains($0) } },
                    "none of \(frames) in the top frames \(top)")
            }
            if let blocking {
                let id = report.cause?.blockingThreadId
                let name = report.threads?.first { $0.threadId == id }?.name
                #expect(name == blocking, "blocking thread \(String(describing: id)) \(String(describing: name))")
            }
            let symbols = (report.pointStack?.frames ?? []).compactMap(\.symbol)
            for name in c.pointStackContains {
                #expect(symbols.contains { $0.contains(name) }, "\(name) is not in the point stack \(symbols)")
            }
            let switched = (report.pointStack?.frames ?? []).filter { $0.kind == .stackSwitch }
            if let name = c.stackSwitchAt {
                #expect(
                    switched.count == 1 && switched[0].symbol?.contains(name) == true,
                    "stack-switch frames \(switched.map { $0.symbol ?? "?" }) in \(symbols)")
                // The loop thread's snapshot has the same stack, marked the same way.
                let loopThread = report.threads?.first { $0.threadId == report.loop.threadId }
                let marked = loopThread?.frames.filter { $0.kind == .stackSwitch }.compactMap(\.symbol) ?? []
                #expect(marked.count == 1 && marked[0].contains(name), "loop thread snapshot: \(marked)")
            } else {
                #expect(switched.isEmpty, "a stack switch where none was expected: \(symbols)")
            }
            if let (symbol, file) = c.sourceFile {
                let frame = report.pointStack?.frames.first { $0.symbol?.contains(symbol) == true }
                #expect(
                    frame?.file?.hasSuffix(file) == true && (frame?.line ?? 0) > 0,
                    "\(symbol) at \(frame?.file ?? "-"):\(frame?.line ?? 0)")
            }
            if let most = c.pointStackAtMost, let frames = report.pointStack?.frames {
                #expect(frames.count <= most, "\(frames.count) frames: \(frames.map { $0.symbol ?? $0.image ?? "?" })")
                #expect(frames.allSatisfy { $0.image != nil }, "a frame outside any image: \(frames.map(\.address))")
            }
            if let text = c.evidenceContains {
                #expect(report.cause?.evidence.contains { $0.contains(text) } == true, "\(describe(report))")
            }
            if let name = c.blockingProcess {
                let process = report.cause?.blockingProcess
                #expect(
                    process?.name == name && (process?.processId ?? 0) > 0 && process?.threadId != nil
                        && process?.state != nil, "blocking process \(String(describing: process)): \(describe(report))"
                )
                // Its thread's stack, captured from outside while the loop waited.
                let stack = process?.frames ?? []
                #expect(
                    stack.contains { $0.symbol != nil }, "its stack \(stack.map { $0.symbol ?? $0.image ?? "?" })")
            }
            if let name = c.candidateProcess {
                let candidate = report.cause?.candidateHolders?.first { $0.processId != nil }
                #expect(
                    candidate?.name == name && candidate?.confidence == .likely,
                    "candidate \(String(describing: candidate)): \(describe(report))")
            }
            if let name = c.candidateThread {
                let candidate = report.cause?.candidateHolders?.first
                #expect(
                    candidate?.name == name && candidate?.confidence == .likely && candidate?.processId == nil,
                    "candidate \(String(describing: candidate)): \(describe(report))")
            }
            if let text = c.captureErrorsContain {
                #expect(report.capture.errors.contains { $0.contains(text) }, "\(report.capture.errors)")
            }
            if deadlock { #expect((report.cause?.deadlockedThreadIds?.count ?? 0) >= 2, "\(describe(report))") }
        }
    }

    static func describe(_ r: StallReport) -> String {
        let top = (r.pointStack?.frames ?? []).prefix(4).map { $0.symbol ?? $0.image ?? "?" }
        let started = r.startedAt.timeIntervalSince1970
        let evidence = r.cause?.evidence ?? []
        // How a stall ended short of the loop's idle wait, when it did: what tells one piece of work split in two.
        let ending = r.notes.filter { $0.hasPrefix("ended where a look saw") }
        return "\(r.cause?.kind.rawValue ?? "-") \(Int(r.durationMs)) ms from \(started) \(evidence) top \(top)"
            + (ending.isEmpty ? "" : " \(ending)")
    }
}

/// Looks at a process's main thread every millisecond on a thread of its own, for as long as it exists, and keeps
/// the spans over which it was traced (TracerPid set) or in a tracing stop.
final class TracingMonitor: @unchecked Sendable {  // `spans` is read after `stop()` joined the thread.
    private let done = DispatchSemaphore(value: 0)
    private let stopped = Locked(false)
    private(set) var spans: [(first: UInt64, last: UInt64)] = []

    init(pid: Int32) {
        Thread { [self] in
            var current: (first: UInt64, last: UInt64)?
            while !stopped.withLock({ $0 }), let state = SidecarFixtures.traceState(pid: pid) {
                let now = Self.now()
                if state.tracer != "0" || state.state == "t" || state.state == "T" {
                    current = (current?.first ?? now, now)
                } else if let span = current {
                    spans.append(span)
                    current = nil
                }
                usleep(1000)
            }
            if let current { spans.append(current) }
            done.signal()
        }.start()
    }

    func stop() {
        stopped.withLock { $0 = true }
        done.wait()
    }

    /// CLOCK_REALTIME in nanoseconds: the clock the programs print their own times in.
    static func now() -> UInt64 {
        var t = timespec()
        clock_gettime(CLOCK_REALTIME, &t)
        return UInt64(t.tv_sec) * 1_000_000_000 + UInt64(t.tv_nsec)
    }
}
