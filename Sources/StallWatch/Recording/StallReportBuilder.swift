// StallReportBuilder: turns recorded StallEvidence into a StallReport; no threads, signals or /proc reads.
import Foundation

/// What the builder needs of a symbolicator: report frames for captured ones, the images those frames point into,
/// and the problems met. ``Symbolicator`` is one; tests give a table.
protocol FrameResolving: AnyObject {
    /// One report frame per captured frame, looked up as its kind says, with the report kind it implies.
    func symbolicate(_ frames: [UnwoundFrame]) -> [StackFrame]
    func images(for frames: [StackFrame]) -> [ImageInfo]
    var errors: [String] { get }
    /// Whether frames get file:line (symbolication `full`).
    var looksUpLines: Bool { get }
    /// Frames given so far without file:line because their image's line tables were not loaded yet.
    var pendingLineLookups: Int { get }
}

extension Symbolicator: FrameResolving {
    var looksUpLines: Bool { mode == .full }
}

extension FrameResolving {
    var looksUpLines: Bool { true }
    var pendingLineLookups: Int { 0 }
}

/// Builds the report of one stall from its evidence: frames, call tree and point stack, signature, cause,
/// capture costs, and the dates of the detector's monotonic times.
///
/// Pure given its resolver and clock (the clock only times symbolication for `capture.symbolicationMicros`):
/// the same evidence gives the same report, so reports can be tested from hand-made evidence.
struct StallReportBuilder {
    let configuration: StallWatchConfiguration
    /// The thresholds the stall was judged by (the configuration's, or a heartbeat's): the report's, and the
    /// judge of its severity.
    let detector: StallDetector.Configuration
    let loopName: String
    /// The report's `detection.source`, `process` block, and whether the loop's phase is known.
    let detectionSource: DetectionSource
    let process: StallReport.ProcessDescription
    let phaseKnown: Bool
    /// The report's `capture.method`.
    let captureMethod: CaptureMethod
    /// CLOCK_MONOTONIC, read around symbolication.
    var clock: () -> UInt64

    init(
        configuration: StallWatchConfiguration, detector: StallDetector.Configuration? = nil, loopName: String,
        detectionSource: DetectionSource, process: StallReport.ProcessDescription, phaseKnown: Bool,
        captureMethod: CaptureMethod, clock: @escaping () -> UInt64
    ) {
        self.configuration = configuration
        self.detector = detector ?? configuration.detectorConfiguration
        self.loopName = loopName
        self.detectionSource = detectionSource
        self.process = process
        self.phaseKnown = phaseKnown
        self.captureMethod = captureMethod
        self.clock = clock
    }

    /// The report of `evidence`.
    ///
    /// - Parameters:
    ///   - status: `ongoing` for the provisional report, `ended` or `unrecovered` for the final one.
    ///   - endNanos: When the loop moved on (CLOCK_MONOTONIC); nil while it has not.
    ///   - final: All samples and the context (else the first sample only, for a report that must be quick).
    ///   - now: The duration's end when `endNanos` is nil; nil reads the clock.
    ///   - symbols: Resolves the addresses.
    func build(
        _ evidence: StallEvidence, status: StallReport.Status, endNanos: UInt64?, final: Bool, now: UInt64?,
        symbols: any FrameResolving
    ) -> StallReport {
        let stall = evidence.stall
        let samples = evidence.samples
        let current = now ?? clock()
        let durationNanos = (endNanos ?? current) &- stall.startNanos
        let symbolStart = clock()
        let pendingBefore = symbols.pendingLineLookups
        let chosen = final ? samples : Array(samples.prefix(1))
        let sampleFrames = chosen.map { symbols.symbolicate($0.frames) }
        var threads = evidence.threads.map(\.snapshot)
        for (index, raw) in evidence.threads.enumerated() {
            threads[index].frames = symbols.symbolicate(Array(raw.frames.prefix(configuration.maxThreadFrames)))
            if threads[index].frames.isEmpty && threads[index].error == nil {
                threads[index].error = "stack not captured"
            }
        }
        let symbolicationNanos = clock() &- symbolStart
        let linesPending = !symbols.looksUpLines || symbols.pendingLineLookups != pendingBefore
        let reportSamples = zip(chosen, sampleFrames).map { raw, frames in
            StallReport.Sample(
                offsetMs: StallReport.milliseconds(raw.offsetNanos), frames: frames,
                pauseMicros: raw.pauseNanos.map(StallReport.microseconds),
                error: raw.error, thread: raw.probe.map { threadState($0, first: evidence.firstProbe) })
        }
        let tree = CallTree(samples: StallSignature.aggregatable(reportSamples))
        let pointStack = StallSignature.dominantStack(of: tree)
        let pauses = samples.compactMap(\.pauseNanos).map(StallReport.microseconds).sorted()
        let unwinds = samples.compactMap(\.unwindNanos).map(StallReport.microseconds).sorted()
        let pauseCoverage = Self.pauseCoverage(
            samples, stopped: pauses.count, timeoutNanos: configuration.intervals.captureTimeout)
        let severity: StallReport.Severity =
            stall.isHang || detector.isHang(durationNanos: durationNanos) ? .hang : .stall
        let wallDate = { (mono: UInt64) in Self.wallDate(mono, evidence: evidence) }
        var report = StallReport(
            id: evidence.reportID, status: status, severity: severity, startedAt: wallDate(stall.startNanos),
            endedAt: endNanos.map(wallDate), durationMs: StallReport.milliseconds(durationNanos),
            detection: .init(
                source: detectionSource, strategy: configuration.strategy,
                thresholdMs: StallReport.milliseconds(detector.thresholdNanos),
                hangThresholdMs: StallReport.milliseconds(detector.hangThresholdNanos),
                detectedAt: wallDate(stall.detectedNanos),
                latencyMs: StallReport.milliseconds(stall.latencyNanos)),
            process: process,
            loop: .init(
                name: loopName, threadId: evidence.threadID ?? 0,
                phase: phaseKnown ? stall.activity.description : "unknown",
                iteration: stall.sequence),
            samples: reportSamples,
            images: symbols.images(for: sampleFrames.flatMap { $0 } + (pointStack?.frames ?? [])),
            signature: StallSignature.compute(stack: pointStack?.frames),
            capture: .init(
                method: captureMethod, sampleIntervalMs: StallReport.milliseconds(evidence.intervalNanos),
                samplesTaken: samples.count, samplesFailed: samples.filter { $0.error != nil }.count,
                pauseMicrosMedian: pauses.isEmpty ? nil : pauses[pauses.count / 2], pauseMicrosMax: pauses.last,
                unwindMicrosMedian: unwinds.isEmpty ? nil : unwinds[unwinds.count / 2],
                symbolicationMicros: StallReport.microseconds(symbolicationNanos),
                errors: evidence.setupErrors + evidence.captureErrors + pauseCoverage + symbols.errors),
            notes: evidence.notes, annotations: evidence.annotations)
        report.pointStack = pointStack
        report.callTree = tree.roots.isEmpty ? nil : tree.roots
        report.threads = threads.isEmpty ? nil : threads
        report.occurrences = 1
        // Only /proc evidence dates a stall it did not see begin by bounds; a loop's own words (in-process, the
        // heartbeat, a pool worker's job stamp) give its exact start, however late the watching began.
        if stall.startedBeforeWatching, detectionSource == .proc { report.startedBeforeAttach = true }
        report.cause = classify(
            evidence, wallNanos: durationNanos, endNanos: endNanos, reportSamples: reportSamples, threads: threads)
        // The other process's stack, where it is the one the verdict names (and its thread, when one is named).
        if let peer = evidence.peerStack, let process = report.cause?.blockingProcess,
            process.processId == peer.processID, process.threadId == nil || process.threadId == peer.threadID
        {
            report.cause?.blockingProcess?.threadId = peer.threadID
            report.cause?.blockingProcess?.frames = peer.frames
        }
        if final { report.context = evidence.context }
        report.task = evidence.task
        if let capture = evidence.leadUp {
            var builder = LeadUpSectionBuilder(
                stallStartNanos: stall.startNanos, thresholdNanos: detector.thresholdNanos, wallDate: wallDate)
            builder.symbolicate = { symbols.symbolicate($0) }
            report.leadUp = builder.build(capture)
        }
        // A names-only provisional report of a `full` configuration has its lines pending, as has a final report
        // written before some images' line tables had loaded; `fast` and `off` reports never get lines.
        if configuration.symbolication == .full {
            report.symbolication = .init(lines: linesPending ? .pending : .complete)
        }
        if let pool = evidence.pool {
            report.pool = pool
            report.cause = .init(
                kind: .saturated,
                evidence: [
                    "all \(pool.workers.count) workers of the Concurrency pool ran one job each past the threshold "
                        + "while \(pool.waitingJobs) jobs waited"
                ])
        }
        return report
    }

    /// What the pause figures measured when some captures did not stop the thread (it was inside the kernel and
    /// went on): those are not in the median and maximum, and the line says why each group did not stop.
    static func pauseCoverage(_ samples: [StallEvidence.Sample], stopped: Int, timeoutNanos: UInt64) -> [String] {
        var lines: [String] = []
        let unstopped = samples.filter(\.captureTimedOut)
        if !unstopped.isEmpty {
            func group(_ reason: UnstoppedThread, _ what: String) -> String? {
                let these = unstopped.filter { $0.unstopped == reason }
                guard !these.isEmpty else { return nil }
                let calls = Set(these.compactMap { $0.probe?.syscall }.map(SyscallTable.name)).sorted()
                return "\(these.count) \(what)" + (calls.isEmpty ? "" : " in \(calls.joined(separator: ", "))")
            }
            let groups = [
                group(.workingInKernel, "released at once with the thread working inside the kernel"),
                group(.uninterruptible, "left alone with the thread in uninterruptible sleep"),
                group(
                    .timedOut,
                    "timed out after \(describeNanoseconds(timeoutNanos)) with the thread working inside the kernel "
                        + "or waiting for a CPU"),
            ].compactMap { $0 }
            lines.append(
                "pause figures cover the \(stopped) of \(samples.count) captures that stopped the thread; "
                    + groups.joined(separator: ", ") + ": those did not pause it (its call went on)")
        }
        // A stop long after the interrupt: the thread finished a kernel call that does not stop first (or waited
        // for a CPU). The pause figure counts from the interrupt, the conservative side; say how much was that.
        let late = samples.compactMap(\.stopWaitNanos).filter { $0 > Self.lateStopNanos }.sorted()
        if let longest = late.last {
            lines.append(
                "\(late.count) of \(samples.count) captures stopped the thread only \(StallReport.milliseconds(late[0]))–"
                    + "\(StallReport.milliseconds(longest)) ms after the interrupt (it was inside a kernel call that does not stop, "
                    + "or waiting for a CPU): their pause figures include that wait")
        }
        return lines
    }

    /// A stop later than this after the interrupt is called out (a thread in user space or a restartable wait
    /// stops within tens of microseconds; a loaded machine adds a few milliseconds).
    static let lateStopNanos: UInt64 = 10_000_000

    private func classify(
        _ evidence: StallEvidence, wallNanos: UInt64, endNanos: UInt64?, reportSamples: [StallReport.Sample],
        threads: [StallReport.ThreadSnapshot]
    ) -> StallReport.Cause? {
        guard let tid = evidence.threadID else { return nil }
        let samples = evidence.samples
        let notSampled = samples.isEmpty && evidence.samplesAfterEnd > 0
        let observations = zip(samples, reportSamples).compactMap { raw, sample -> CauseClassifier.Observation? in
            guard let probe = raw.probe else { return nil }
            var observation = CauseClassifier.Observation(
                state: probe.state, syscall: probe.syscall, wchan: probe.wchan,
                symbols: sample.frames.compactMap(\.symbol), lockOwner: raw.lockOwner, waitKind: probe.wait?.kind,
                captureTimedOut: raw.captureTimedOut, fileLockHolder: raw.fileLockHolder,
                otherProcess: raw.otherProcess, ownWakeupSleep: raw.ownWakeupSleep, sharedLock: raw.sharedLock)
            // `-1 sp pc` in its `syscall` file: blocked in user space, not in a call ("running" has no sp).
            observation.inPageFault =
                probe.state == "D" && probe.wait.map { !$0.inSyscall && $0.stackPointer != 0 } == true
            observation.stopWaitNanos = raw.stopWaitNanos
            observation.recordedHolder = raw.recordedHolder
            observation.recordedCycle = raw.recordedCycle
            observation.lockOwnerSource = raw.lockOwnerSource
            return observation
        }
        var loopCPU: UInt64?
        var runQueueWait: UInt64?
        // A reading's run-queue wait with the wait still under way then (the kernel adds it only once the thread
        // runs): what a difference of two readings must take.
        func waitSoFar(_ probe: ThreadProbe, at: UInt64) -> UInt64 {
            probe.runQueueWaitNanos &+ Self.waitUnderWay(at: probe, at, in: evidence)
        }
        func at(_ sample: StallEvidence.Sample) -> UInt64 { evidence.stall.startNanos &+ sample.offsetNanos }
        // The figures end at the last reading that has them: a thread read as it exits (its process ending the
        // stall) has no schedstat, and stat's coarser CPU time and no run-queue wait are nothing to subtract from.
        let lastMeasured = samples.last { $0.probe?.scheduleRead == true }
        let finalProbe = evidence.lastProbe.flatMap { $0.probe.scheduleRead ? $0 : nil }
        if let first = evidence.firstProbe?.cpuNanos, let last = lastMeasured?.probe?.cpuNanos, last >= first {
            loopCPU = last - first
        }
        if let first = evidence.firstProbe, let lastSample = lastMeasured, let last = lastSample.probe,
            let firstAt = samples.first.map(at)
        {
            let (from, to) = (waitSoFar(first, at: firstAt), waitSoFar(last, at: at(lastSample)))
            if to >= from { runQueueWait = to - from }
        }
        // The CPU delta covers first → last measured sample, not the whole stall: compare it with that span.
        var span = (lastMeasured?.offsetNanos ?? 0) &- (samples.first?.offsetNanos ?? 0)
        if span == 0, let first = evidence.firstProbe, let (last, lastAt) = finalProbe, lastAt > evidence.monoAtBegin {
            // One sample only: detection → the final report.
            span = lastAt - evidence.monoAtBegin
            if last.cpuNanos >= first.cpuNanos { loopCPU = last.cpuNanos - first.cpuNanos }
            let (from, to) = (
                waitSoFar(first, at: samples.first.map(at) ?? evidence.monoAtBegin), waitSoFar(last, at: lastAt)
            )
            if to >= from { runQueueWait = to - from }
        }
        // From the stall's very start when the source read it: a stall with one sample, or whose thread waited for
        // a CPU before it was detected, still has its run-queue evidence.
        if let start = evidence.stallStartSchedule {
            let reading = { (sample: StallEvidence.Sample) in sample.probe.map { ($0, at(sample)) } }
            var end = finalProbe.map { ($0.probe, $0.monoNanos) } ?? lastMeasured.flatMap(reading)
            // A stall a capture saw end (the thread back in its idle wait) may end well before the final reading
            // (a sample interval or more, the watcher being late), which then counts what the thread did after it
            // (its next piece of work): the last sample read by the end is taken instead, when it covers at least
            // half the stall.
            if let endNanos, let (_, endAt) = end, endAt > endNanos &+ evidence.intervalNanos,
                endNanos > start.monotonicNanos,
                let before = samples.last(where: { $0.probe?.scheduleRead == true && at($0) <= endNanos })
                    .flatMap(reading),
                (before.1 &- start.monotonicNanos) * 2 >= endNanos - start.monotonicNanos
            {
                end = before
            }
            if let (last, endAt) = end, endAt > start.monotonicNanos, last.cpuNanos >= start.cpuNanos,
                last.runQueueWaitNanos >= start.runQueueWaitNanos
            {
                span = endAt - start.monotonicNanos
                loopCPU = last.cpuNanos - start.cpuNanos
                runQueueWait = min(span, waitSoFar(last, at: endAt) - start.runQueueWaitNanos)
                let inSpan = samples.filter { at($0) >= start.monotonicNanos && at($0) <= endAt }
                if let floor = Self.neverSleptWait(from: start, to: last, span: span, samples: inSpan) {
                    runQueueWait = max(runQueueWait ?? 0, floor)
                }
            }
        }
        var input = CauseClassifier.Evidence(
            loopThreadID: tid, observations: observations, wallNanos: span > 0 ? span : wallNanos,
            loopCPUNanos: span > 0 ? loopCPU : nil, threads: threads)
        input.loopRunQueueWaitNanos = span > 0 ? runQueueWait : nil
        // The span may start only at the first sample (a threshold into the stall): the stall up to its end.
        let measuredEnd =
            evidence.lastProbe.map { $0.monoNanos &- evidence.stall.startNanos } ?? samples.last?.offsetNanos ?? 0
        input.stallNanos = max(measuredEnd, span)
        input.throttledNanos = evidence.context?.cgroupThrottledMs.map { UInt64($0 * 1_000_000) }
        if let context = evidence.context, let busy = context.diskBusyPercent, let moved = context.diskMiB {
            input.disk = (busy / 100, UInt64(moved * 1_048_576), context.processDiskMiB.map { UInt64($0 * 1_048_576) })
        }
        input.lateWakeupNanos = evidence.lateWakeupNanos
        input.thresholdNanos = detector.thresholdNanos
        // No sample of the thread during the stall: no evidence of what held it, unless the kernel's figures from
        // the stall's start say the machine did (they run past its end, to the last reading: the share of the wait
        // errs low).
        func figuresOnly(_ why: String, ranOtherWork: Bool = false) -> StallReport.Cause {
            guard evidence.stallStartSchedule != nil, let cpu = CauseClassifier.cpuFact(input) else {
                return .init(kind: .unknown, evidence: [why])
            }
            let figures = ["from the stall's start to the thread's last reading, " + cpu]
            if ranOtherWork, let threshold = input.thresholdNanos, let ran = input.loopCPUNanos, ran * 4 >= threshold {
                // Busy with other work: the pool's threads were taken, whatever the machine did besides.
                return .init(
                    kind: .unknown,
                    evidence: [why] + figures + [
                        "it ran other work for \(ran / 1_000_000) ms of the stall: the pool's threads were busy"
                    ])
            }
            if input.wallNanos * 2 >= input.stallNanos ?? input.wallNanos,
                let starved = CauseClassifier.runQueueStarvation(input, evidence: [why] + figures)
            {
                return starved
            }
            return .init(
                kind: .unknown, evidence: [why] + figures + [CauseClassifier.runQueueFact(input)].compactMap { $0 })
        }
        if evidence.tookUpAtEnd {
            // Its CPU time was other work (a pool thread runs other queues' blocks), never the loop's: starved only
            // when it barely ran and waited for a CPU.
            return figuresOnly(
                "no thread held the loop during the stall: thread \(tid) took it up and ended it (not sampled)",
                ranOtherWork: true)
        }
        if notSampled {
            let why =
                "not sampled: the stall ended before its first sample was captured (the watcher looked, found the "
                + "thread still stuck, and sampled it after it had moved on)"
            // The capture came too late, but the /proc reading just before it was over before the stall ended: the
            // thread's state inside the stall. Blocked in a call that says what it waits for, it is the cause's
            // only observation (no stack).
            if let probe = evidence.probeBeforeEnd, probe.state == "D" || probe.state == "S" {
                var observation = CauseClassifier.Observation(
                    state: probe.state, syscall: probe.syscall, wchan: probe.wchan, symbols: [], lockOwner: nil,
                    waitKind: probe.wait?.kind, captureTimedOut: false, fileLockHolder: nil, otherProcess: nil,
                    ownWakeupSleep: nil, sharedLock: nil)
                observation.inPageFault =
                    probe.state == "D" && probe.wait.map { !$0.inSyscall && $0.stackPointer != 0 } == true
                if [.io, .lock, .sleep].contains(CauseClassifier.activity(of: observation)) {
                    var single = input
                    single.observations = [observation]
                    var cause = CauseClassifier.classify(single)
                    cause.evidence.insert(
                        why + "; its only observation is the /proc reading taken for that sample, over before the "
                            + "stall ended: the sample count below is that reading", at: 0)
                    return cause
                }
            }
            return figuresOnly(why)
        }
        // The thread sampled as the loop's (a queue's drain lock named it) parked in the Dispatch pool's wait for
        // work at every sample: no code held the queue, which waited to be taken up (by a pool thread given a CPU).
        if !observations.isEmpty, observations.allSatisfy({ CauseClassifier.idleInDispatchPool($0.symbols) }) {
            return figuresOnly(
                "no thread held the loop during the stall: thread \(tid), read as the one holding it, was parked in "
                    + "the Dispatch pool's wait for work at all \(observations.count) samples",
                ranOtherWork: true)
        }
        return CauseClassifier.classify(input)
    }

    /// The wait for a CPU of a thread that never slept over a span: runnable at its start, at every sample and at
    /// its end (`last`), its voluntary switches moved by no more than the captures' own stops (two each, and two
    /// for the all-thread snapshot) — it was on a CPU, stopped for a capture, or waiting for a CPU, so the span
    /// less its CPU time and the captures' stops was that wait, at least. The kernel adds a wait to its run-queue
    /// figure only once the thread runs, and a wait under way is read only through the thread's CPU clock, which a
    /// loaded machine can keep the reader from: this floor holds whatever the kernel has counted yet. Nil when
    /// the rule does not apply (a reading not runnable, or a sleep).
    static func neverSleptWait(
        from start: ThreadSchedule, to last: ThreadProbe, span: UInt64, samples: [StallEvidence.Sample]
    ) -> UInt64? {
        guard start.runnable == true, let switches = start.voluntarySwitches, last.state == "R",
            last.voluntarySwitches >= switches, last.cpuNanos >= start.cpuNanos,
            samples.allSatisfy({ $0.probe?.state == "R" }),
            last.voluntarySwitches - switches <= 2 * UInt64(samples.count) + 2
        else { return nil }
        let pauses = samples.compactMap(\.pauseNanos)
        // The snapshot's stop of the thread was not timed: as long as the longest sample's.
        let stopped = pauses.reduce(0, +) + (pauses.max() ?? 0)
        let accounted = (last.cpuNanos - start.cpuNanos) + stopped
        return span > accounted ? span - accounted : 0
    }

    /// The wait for a CPU still under way at `reading` (read at `at`), which the kernel adds to the run-queue
    /// figure only once the thread runs again: a niced loop behind busier work can wait seconds for its next turn,
    /// and its figures would show none of it. The wait the reading measured (``ThreadProbe/queuedNanos``), or at
    /// least the time since the earliest of the unbroken run of readings up to this one that found the thread
    /// runnable with the same CPU time and run-queue wait: a thread that did not run in between cannot have gone
    /// to sleep (only a running thread puts itself to sleep), so it waited for a CPU all along. Zero for a thread
    /// not runnable at the reading.
    static func waitUnderWay(at reading: ThreadProbe, _ at: UInt64, in evidence: StallEvidence) -> UInt64 {
        guard reading.state == "R", reading.scheduleRead else { return 0 }
        var earliest = at
        for sample in evidence.samples.reversed() {
            let when = evidence.stall.startNanos &+ sample.offsetNanos
            guard when <= at else { continue }
            guard let probe = sample.probe, probe.state == "R", probe.scheduleRead,
                probe.cpuNanos == reading.cpuNanos, probe.runQueueWaitNanos == reading.runQueueWaitNanos
            else { break }
            earliest = when
        }
        return max(reading.queuedNanos ?? 0, at - earliest)
    }

    private func threadState(_ probe: ThreadProbe, first: ThreadProbe?) -> StallReport.ThreadState {
        // Counters only grow, but a reading can come from a coarser source than the first one (stat's clock ticks
        // when schedstat could not be read, as for a thread that is exiting): never less than nothing.
        let cpu = first.map { probe.cpuNanos >= $0.cpuNanos ? probe.cpuNanos - $0.cpuNanos : 0 } ?? 0
        let wait =
            first.map {
                probe.runQueueWaitNanos >= $0.runQueueWaitNanos ? probe.runQueueWaitNanos - $0.runQueueWaitNanos : 0
            }
            ?? 0
        return .init(
            state: probe.state, wchan: probe.wchan, syscall: probe.syscallName, syscallNumber: probe.syscall,
            cpuTimeMs: StallReport.milliseconds(cpu), voluntarySwitches: probe.voluntarySwitches,
            involuntarySwitches: probe.involuntarySwitches, runQueueWaitMs: StallReport.milliseconds(wait))
    }

    /// The date of a CLOCK_MONOTONIC time, from the realtime/monotonic pair read at detection.
    static func wallDate(_ mono: UInt64, evidence: StallEvidence) -> Date {
        let wall = Double(evidence.wallAtBegin) - (Double(evidence.monoAtBegin) - Double(mono))
        return Date(timeIntervalSince1970: wall / 1e9)
    }

}
