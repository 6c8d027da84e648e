// Building, deduplicating and writing the report of the stall a StallRecorder follows.
import CStallWatchCore
import Foundation

extension StallRecorder {
    /// Writes the provisional report (at detection, or on escalation to a hang).
    func write(status: StallReport.Status, endNanos: UInt64?, final: Bool, now: UInt64? = nil) -> StallReport? {
        guard let report = buildReport(status: status, endNanos: endNanos, final: final, now: now) else { return nil }
        persist(report)
        return report
    }

    /// The final report: written as its own file, folded into a recent one with the same signature, or (over
    /// the hourly cap) only counted. Returns the report of this stall either way, for listeners.
    func finish(status: StallReport.Status, endNanos: UInt64?, now: UInt64) -> StallReport? {
        guard var report = buildReport(status: status, endNanos: endNanos, final: true, now: now) else { return nil }
        switch deduplicator.decide(signature: report.signature, reportID: report.id, now: now) {
        case .writeNew:
            let suppressed = deduplicator.takeSuppressed()
            if suppressed > 0 {
                report.notes.append("\(suppressed) earlier stall(s) were not written: over maxReportsPerHour")
            }
            persist(report)
        case .fold(let existingID, let occurrences):
            removeProvisional(report.id)
            fold(into: existingID, occurrences: occurrences, lastSeen: report.startedAt, fallback: report)
            report.occurrences = occurrences
        case .suppress:
            removeProvisional(report.id)
        }
        return report
    }

    private func persist(_ report: StallReport) {
        do {
            try writer.write(report)
        } catch {
            emit(.reportFailed(error))
        }
    }

    private func removeProvisional(_ id: String) {
        unlink(writer.directory + "/" + ReportWriter.fileName(forReportID: id))
    }

    /// Bumps `occurrences`/`lastSeen` of the report already on disk (rewritten atomically); if it is gone
    /// (pruned, deleted), this stall's report is written instead.
    private func fold(into id: String, occurrences: Int, lastSeen: Date, fallback: StallReport) {
        let path = writer.directory + "/" + ReportWriter.fileName(forReportID: id)
        guard var existing = try? ReportStore.load(path: path) else {
            persist(fallback)
            return
        }
        existing.occurrences = occurrences
        existing.firstSeen = existing.firstSeen ?? existing.startedAt
        existing.lastSeen = lastSeen
        persist(existing)
    }

    func buildReport(status: StallReport.Status, endNanos: UInt64?, final: Bool, now: UInt64?) -> StallReport? {
        guard let stall else { return nil }
        let current = now ?? sw_monotonic_ns()
        let durationNanos = (endNanos ?? current) &- stall.startNanos
        let symbolStart = sw_monotonic_ns()
        let chosen = final ? samples : Array(samples.prefix(1))
        let symbols = final ? symbolicator : quickSymbolicator
        let sampleFrames = chosen.map { symbols.symbolicate($0.addresses) }
        var threads = threadSnapshot.map(\.snapshot)
        for (index, raw) in threadSnapshot.enumerated() {
            threads[index].frames = symbols.symbolicate(Array(raw.addresses.prefix(configuration.maxThreadFrames)))
            if threads[index].frames.isEmpty && threads[index].error == nil {
                threads[index].error = "stack not captured"
            }
        }
        let symbolicationNanos = sw_monotonic_ns() &- symbolStart
        let reportSamples = zip(chosen, sampleFrames).map { raw, frames in
            StallReport.Sample(
                offsetMs: Self.millis(raw.offsetNanos), frames: frames, pauseMicros: raw.pauseNanos.map(Self.micros),
                error: raw.error, thread: raw.probe.map(threadState))
        }
        let tree = CallTree(samples: StallSignature.aggregatable(reportSamples))
        let pointStack = StallSignature.dominantStack(of: tree)
        let pauses = samples.compactMap(\.pauseNanos).map(Self.micros).sorted()
        let unwinds = samples.compactMap(\.unwindNanos).map(Self.micros).sorted()
        let severity: StallReport.Severity =
            durationNanos >= UInt64(configuration.hangThresholdMs) * 1_000_000 || stall.isHang ? .hang : .stall
        var report = StallReport(
            id: reportID, status: status, severity: severity, startedAt: wallDate(stall.startNanos),
            endedAt: endNanos.map(wallDate), durationMs: Self.millis(durationNanos),
            detection: .init(
                source: target.detectionSource, strategy: configuration.strategy,
                thresholdMs: Double(configuration.thresholdMs),
                hangThresholdMs: Double(configuration.hangThresholdMs), detectedAt: wallDate(stall.detectedNanos),
                latencyMs: Self.millis(stall.latencyNanos)),
            process: target.process,
            loop: .init(
                name: loopName, threadId: thread?.threadID ?? 0,
                phase: target.phaseKnown ? stall.activity.description : "unknown",
                iteration: stall.sequence),
            samples: reportSamples,
            images: symbols.images(for: sampleFrames.flatMap { $0 } + (pointStack?.frames ?? [])),
            signature: StallSignature.compute(stack: pointStack?.frames),
            capture: .init(
                method: target.sampler?.captureMethod ?? "none", sampleIntervalMs: Double(intervalNanos) / 1e6,
                samplesTaken: samples.count, samplesFailed: samples.filter { $0.error != nil }.count,
                pauseMicrosMedian: pauses.isEmpty ? nil : pauses[pauses.count / 2], pauseMicrosMax: pauses.last,
                unwindMicrosMedian: unwinds.isEmpty ? nil : unwinds[unwinds.count / 2],
                symbolicationMicros: Self.micros(symbolicationNanos),
                errors: setupErrors + captureErrors + symbols.errors),
            notes: notes, annotations: annotations)
        report.pointStack = pointStack
        report.callTree = tree.roots.isEmpty ? nil : tree.roots
        report.threads = threads.isEmpty ? nil : threads
        report.occurrences = 1
        report.cause = classify(wallNanos: durationNanos, reportSamples: reportSamples, threads: threads)
        if final { report.context = contextProbe?.finish(monotonicNanos: current) }
        return report
    }

    private func classify(wallNanos: UInt64, reportSamples: [StallReport.Sample], threads: [StallReport.ThreadSnapshot])
        -> StallReport.Cause?
    {
        guard let tid = thread?.threadID else { return nil }
        let observations = zip(samples, reportSamples).compactMap { raw, sample -> CauseClassifier.Observation? in
            guard let probe = raw.probe else { return nil }
            return .init(
                state: probe.state, syscall: probe.syscall, wchan: probe.wchan,
                symbols: sample.frames.compactMap(\.symbol), lockOwner: raw.lockOwner)
        }
        var loopCPU: UInt64?
        if let first = firstProbe?.cpuNanos, let last = samples.last?.probe?.cpuNanos, last >= first {
            loopCPU = last - first
        }
        // The CPU delta covers first → last sample, not the whole stall: compare it with that span.
        let span = (samples.last?.offsetNanos ?? 0) &- (samples.first?.offsetNanos ?? 0)
        return CauseClassifier.classify(
            .init(
                loopThreadID: tid, observations: observations, wallNanos: span > 0 ? span : wallNanos,
                loopCPUNanos: span > 0 ? loopCPU : nil, threads: threads))
    }

    private func threadState(_ probe: ThreadProbe) -> StallReport.ThreadState {
        let cpu = firstProbe.map { probe.cpuNanos &- $0.cpuNanos } ?? 0
        let wait = firstProbe.map { probe.runQueueWaitNanos &- $0.runQueueWaitNanos } ?? 0
        return .init(
            state: probe.state, wchan: probe.wchan, syscall: probe.syscallName, syscallNumber: probe.syscall,
            cpuTimeMs: Self.millis(cpu), voluntarySwitches: probe.voluntarySwitches,
            involuntarySwitches: probe.involuntarySwitches, runQueueWaitMs: Self.millis(wait))
    }

    func wallDate(_ mono: UInt64) -> Date {
        let wall = Double(wallAtBegin) - (Double(monoAtBegin) - Double(mono))
        return Date(timeIntervalSince1970: wall / 1e9)
    }
}
