// Building reports from hand-made evidence: no threads, no signals, no /proc; a table stands in for symbols.
import Foundation
import StallWatchTestSupport
import Testing

@testable import StallWatch

/// Resolves addresses from a fixed table: `0x1000` → `work`, `0x2000` → `caller`, `0x3000` → `main`.
final class TableResolver: FrameResolving {
    let names: [UInt64: String]
    var errors: [String] = []

    /// The table, with `more` names besides.
    init(more: [UInt64: String] = [:]) {
        names = [0x1000: "work", 0x2000: "caller", 0x3000: "main", 0x4000: "pthread_mutex_lock"].merging(more) { $1 }
    }

    func symbolicate(_ frames: [UnwoundFrame]) -> [StackFrame] {
        frames.map { captured in
            let address = captured.address
            var frame = StackFrame(address: address)
            if let name = names[address] {
                frame = StackFrame(address: address, image: "/usr/bin/service", offset: address, symbol: name)
            }
            frame.kind = captured.reportKind
            return frame
        }
    }

    func images(for frames: [StackFrame]) -> [ImageInfo] {
        Set(frames.compactMap(\.image)).sorted().map { ImageInfo(path: $0, buildId: "ab12", base: 0, size: nil) }
    }
}

@Suite(.offPool) struct StallReportBuilderTests {
    static let ms: UInt64 = 1_000_000
    /// The stall: the loop entered `afterWaiting` at 1 000 ms and the detector saw it at 1 260 ms.
    static let stall = StallDetector.Stall(
        sequence: 41, activity: .afterWaiting, startNanos: 1_000 * ms, detectedNanos: 1_260 * ms,
        latencyNanos: 10 * ms, isHang: false, notes: [])

    static func builder(phaseKnown: Bool = true) -> StallReportBuilder {
        var configuration = StallWatchConfiguration()
        configuration.thresholdMs = 250
        configuration.hangThresholdMs = 2_000
        return StallReportBuilder(
            configuration: configuration, loopName: "main", detectionSource: "in-process",
            process: .init(pid: 42, executable: "/usr/bin/service", buildId: nil, host: "test"),
            phaseKnown: phaseKnown, captureMethod: "signal", clock: { 0 })
    }

    static func probe(state: String = "R", syscall: Int? = nil, arg0: UInt64? = nil, cpuMs: UInt64) -> ThreadProbe {
        ThreadProbe(
            threadID: 42, name: "service", state: state, wchan: nil, syscall: syscall, syscallArg0: arg0,
            cpuNanos: cpuMs * ms, voluntarySwitches: 3, involuntarySwitches: 1, runQueueWaitNanos: 0)
    }

    /// Two samples of a thread running `work` ← `caller` ← `main`, 50 ms apart, with CPU time growing alongside.
    static func onCPUEvidence() -> StallEvidence {
        var evidence = StallEvidence(
            stall: stall, threadID: 42, reportID: "r1", wallAtBegin: 1_790_000_000_000 * ms, monoAtBegin: 1_260 * ms,
            intervalNanos: 50 * ms)
        evidence.firstProbe = probe(cpuMs: 500)
        let stack = UnwoundFrame.backtrace([0x1000, 0x2000, 0x3000])
        evidence.samples = [
            .init(offsetNanos: 260 * ms, frames: stack, pauseNanos: 20_000, probe: probe(cpuMs: 500)),
            .init(offsetNanos: 310 * ms, frames: stack, pauseNanos: 40_000, probe: probe(cpuMs: 550)),
        ]
        evidence.threads = [
            .init(snapshot: .init(threadId: 42, name: "service", state: "R"), frames: stack),
            .init(snapshot: .init(threadId: 43, name: "worker", state: "S")),
        ]
        evidence.context = StallReport.SystemContext()
        evidence.setupErrors = ["set-up problem"]
        evidence.captureErrors = ["sample 1: late"]
        return evidence
    }

    @Test func finalReportCarriesEverySampleTheDatesAndTheCause() throws {
        let report = Self.builder().build(
            Self.onCPUEvidence(), status: .ended, endNanos: 1_400 * Self.ms, final: true, now: 1_400 * Self.ms,
            symbols: TableResolver())
        #expect(report.id == "r1")
        #expect(report.status == .ended)
        #expect(report.severity == .stall)
        #expect(report.durationMs == 400)
        // Detection happened at wallAtBegin; the start was 260 ms earlier, the end 140 ms later.
        #expect(report.startedAt == Date(timeIntervalSince1970: 1_790_000_000 - 0.26))
        #expect(try #require(report.endedAt).timeIntervalSince1970 == 1_790_000_000.14)
        #expect(report.loop == .init(name: "main", threadId: 42, phase: "afterWaiting", iteration: 41))
        #expect(report.samples.map(\.offsetMs) == [260, 310])
        #expect(report.samples[1].frames.compactMap(\.symbol) == ["work", "caller", "main"])
        #expect(report.samples[1].thread?.cpuTimeMs == 50)
        #expect(report.pointStack?.frames.compactMap(\.symbol) == ["work", "caller", "main"])
        #expect(report.pointStack?.count == 2)
        #expect(report.signature == StallSignature.compute(stack: report.pointStack?.frames))
        #expect(report.signature != "unknown")
        #expect(report.cause?.kind == .cpu)
        #expect(report.capture.samplesTaken == 2)
        #expect(report.capture.pauseMicrosMedian == 40)
        #expect(report.capture.pauseMicrosMax == 40)
        #expect(report.capture.errors == ["set-up problem", "sample 1: late"])
        #expect(report.images.map(\.path) == ["/usr/bin/service"])
        #expect(report.context != nil)
        #expect(report.occurrences == 1)
    }

    /// A later reading below the first (stat's clock ticks where schedstat could not be read, as while a thread
    /// exits) is no time at all: the report stays valid instead of carrying a wrapped-around 2⁶⁴ ns.
    @Test func aSampleWhoseCountersReadLowerThanTheFirstShowsNoTimeAndTheReportIsValid() throws {
        var evidence = Self.onCPUEvidence()
        evidence.firstProbe?.runQueueWaitNanos = 756 * Self.ms
        evidence.samples[1].probe?.cpuNanos = 400 * Self.ms
        let report = Self.builder().build(
            evidence, status: .ended, endNanos: 1_400 * Self.ms, final: true, now: 1_400 * Self.ms,
            symbols: TableResolver())
        #expect(report.samples[1].thread?.cpuTimeMs == 0)
        #expect(report.samples[1].thread?.runQueueWaitMs == 0)
        try report.validate()
    }

    @Test func provisionalReportHasOnlyTheFirstSampleAndNoContext() {
        let report = Self.builder().build(
            Self.onCPUEvidence(), status: .ongoing, endNanos: nil, final: false, now: 1_270 * Self.ms,
            symbols: TableResolver())
        #expect(report.status == .ongoing)
        #expect(report.endedAt == nil)
        #expect(report.durationMs == 270)
        #expect(report.samples.count == 1)
        // The capture summary still counts every sample taken.
        #expect(report.capture.samplesTaken == 2)
        #expect(report.context == nil)
    }

    @Test func threadsWithoutAStackSaySoAndTheLoopThreadKeepsItsFrames() throws {
        let report = Self.builder().build(
            Self.onCPUEvidence(), status: .ended, endNanos: 1_400 * Self.ms, final: true, now: nil,
            symbols: TableResolver())
        let threads = try #require(report.threads)
        #expect(threads.map(\.threadId) == [42, 43])
        #expect(threads[0].frames.count == 3)
        #expect(threads[0].error == nil)
        #expect(threads[1].frames.isEmpty)
        #expect(threads[1].error == "stack not captured")
    }

    @Test func aStallPastTheHangThresholdIsAHangAndAnUnpublishedPhaseIsUnknown() {
        let report = Self.builder(phaseKnown: false).build(
            Self.onCPUEvidence(), status: .unrecovered, endNanos: nil, final: true, now: 3_500 * Self.ms,
            symbols: TableResolver())
        #expect(report.severity == .hang)
        #expect(report.status == .unrecovered)
        #expect(report.durationMs == 2_500)
        #expect(report.loop.phase == "unknown")
    }

    @Test func aFutexWaitWithAKnownOwnerIsALockWaitOnThatThread() {
        var evidence = Self.onCPUEvidence()
        let futex = 202
        for index in evidence.samples.indices {
            evidence.samples[index].frames = UnwoundFrame.backtrace([0x4000, 0x2000, 0x3000])
            evidence.samples[index].probe = Self.probe(state: "S", syscall: futex, arg0: 0x7f00, cpuMs: 500)
            evidence.samples[index].lockOwner = 43
        }
        let report = Self.builder().build(
            evidence, status: .ended, endNanos: 1_400 * Self.ms, final: true, now: 1_400 * Self.ms,
            symbols: TableResolver())
        #expect(report.cause?.kind == .lock)
        #expect(report.cause?.blockingThreadId == 43)
        #expect(report.samples[0].thread?.syscall == "futex")
    }

    @Test func theSameEvidenceBuildsTheSameReport() throws {
        let build = {
            Self.builder().build(
                Self.onCPUEvidence(), status: .ended, endNanos: 1_400 * Self.ms, final: true, now: 1_400 * Self.ms,
                symbols: TableResolver())
        }
        #expect(try build().encodedJSON() == build().encodedJSON())
    }

    /// A stall no thread held (a queue waiting for a pool thread), taken up at its end by thread 42, whose figures
    /// run from the stall's start (1 000 ms) to its reading at 1 400 ms.
    static func takenUpEvidence(cpuMs: UInt64, runQueueMs: UInt64) -> StallEvidence {
        var evidence = StallEvidence(
            stall: stall, threadID: 42, reportID: "r2", wallAtBegin: 1_790_000_000_000 * ms, monoAtBegin: 1_260 * ms,
            intervalNanos: 50 * ms)
        evidence.tookUpAtEnd = true
        evidence.stallStartSchedule = ThreadSchedule(cpuNanos: 0, runQueueWaitNanos: 0, monotonicNanos: 1_000 * ms)
        var last = probe(cpuMs: cpuMs)
        last.runQueueWaitNanos = runQueueMs * ms
        evidence.lastProbe = (last, 1_400 * ms)
        return evidence
    }

    /// Its CPU time was other work, never the queue's: a thread that ran a good part of the threshold says the
    /// pool was busy (no cause of the queue's own); one that barely ran and mostly waited for a CPU was starved.
    @Test func aStallTakenUpAtItsEndIsNeverBlamedOnTheQueueAndStarvedOnlyWhenItsTakerBarelyRan() throws {
        let build = { (evidence: StallEvidence) in
            Self.builder().build(
                evidence, status: .ended, endNanos: 1_390 * Self.ms, final: true, now: 1_400 * Self.ms,
                symbols: TableResolver())
        }
        let busy = try #require(build(Self.takenUpEvidence(cpuMs: 300, runQueueMs: 90)).cause)
        #expect(busy.kind == .unknown)
        #expect(busy.evidence.contains { $0.contains("took it up") })
        #expect(busy.evidence.contains { $0.contains("ran other work for 300 ms") }, "\(busy.evidence)")
        let starved = try #require(build(Self.takenUpEvidence(cpuMs: 5, runQueueMs: 380)).cause)
        #expect(starved.kind == .starved, "\(starved.evidence)")
        let idle = try #require(build(Self.takenUpEvidence(cpuMs: 5, runQueueMs: 10)).cause)
        #expect(idle.kind == .unknown, "\(idle.evidence)")
    }

    /// A thread that a queue's drain lock named as the one holding it, parked in the Dispatch pool's own wait for
    /// work at every sample (libdispatch's worker entry right outside its semaphore wait), held nothing: no thread
    /// held the queue, and no lock is blamed. The same wait with the program's code between (a block of the queue
    /// waiting on a semaphore) is the block's wait, and stays a lock.
    @Test func aThreadParkedInTheDispatchPoolsWaitAtEverySampleHeldNoQueue() throws {
        let pool: [UInt64: String] = [
            0x5000: "__futex_abstimed_wait_common", 0x5100: "__new_sem_wait_slow64.constprop.0",
            0x5200: "_dispatch_sema4_timedwait", 0x5300: "_dispatch_semaphore_wait_slow",
            0x5400: "_dispatch_worker_thread", 0x5500: "start_thread",
        ]
        let build = { (stack: [UInt64]) in
            var evidence = Self.onCPUEvidence()
            for index in evidence.samples.indices {
                evidence.samples[index].frames = UnwoundFrame.backtrace(stack)
                evidence.samples[index].probe = Self.probe(state: "S", syscall: 202, arg0: 0x7f00, cpuMs: 500)
            }
            return Self.builder().build(
                evidence, status: .ended, endNanos: 1_400 * Self.ms, final: true, now: 1_400 * Self.ms,
                symbols: TableResolver(more: pool))
        }
        let parked = try #require(build([0x5000, 0x5100, 0x5200, 0x5300, 0x5400, 0x5500]).cause)
        #expect(parked.kind != .lock, "\(parked)")
        #expect(
            parked.evidence.contains { $0.hasPrefix("no thread held the loop during the stall: thread 42") },
            "\(parked.evidence)")
        let inABlock = try #require(build([0x5000, 0x5100, 0x5200, 0x5300, 0x1000, 0x5400, 0x5500]).cause)
        #expect(inABlock.kind == .lock, "\(inABlock)")
    }

    /// A stall whose only sample was captured after it ended, the /proc reading taken for that sample being over
    /// before the end: the reading is the thread's state inside the stall. Blocked in `fsync` (state D), the stall
    /// is I/O in `fsync`, and the cause says the reading is its only observation; without such a reading, no cause.
    @Test func aStallSampledOnlyAfterItsEndIsJudgedFromTheProcReadingTakenBeforeIt() throws {
        let build = { (reading: ThreadProbe?) in
            var evidence = Self.onCPUEvidence()
            evidence.samples = []
            evidence.samplesAfterEnd = 1
            evidence.probeBeforeEnd = reading
            return Self.builder().build(
                evidence, status: .ended, endNanos: 1_300 * Self.ms, final: true, now: 1_400 * Self.ms,
                symbols: TableResolver())
        }
        let inSync = try #require(build(Self.probe(state: "D", syscall: 74, arg0: 3, cpuMs: 500)).cause)
        #expect(inSync.kind == .io, "\(inSync)")
        #expect(inSync.evidence.first?.hasPrefix("not sampled") == true, "\(inSync.evidence)")
        #expect(inSync.evidence.contains { $0.contains("in I/O (fsync)") }, "\(inSync.evidence)")
        let unread = try #require(build(nil).cause)
        #expect(unread.kind != .io, "\(unread)")
        #expect(unread.evidence.first?.hasPrefix("not sampled") == true, "\(unread.evidence)")
    }

    /// A thread read as it exits has no schedstat (CPU in clock ticks, no run-queue wait): its figures end at the
    /// last reading that had them, and a loop that mostly waited for a CPU until then is still starved.
    @Test func figuresEndAtTheLastReadingThatHasThemWhenTheThreadIsReadAsItExits() throws {
        var evidence = Self.onCPUEvidence()
        evidence.firstProbe?.runQueueWaitNanos = 0
        evidence.samples[1].probe?.cpuNanos = 502 * Self.ms
        evidence.samples[1].probe?.runQueueWaitNanos = 48 * Self.ms
        var exiting = Self.probe(cpuMs: 510)
        exiting.scheduleRead = false
        let stack = UnwoundFrame.backtrace([0x1000, 0x2000, 0x3000])
        evidence.samples.append(.init(offsetNanos: 360 * Self.ms, frames: stack, pauseNanos: 20_000, probe: exiting))
        evidence.lastProbe = (exiting, 1_400 * Self.ms)
        let report = Self.builder().build(
            evidence, status: .ended, endNanos: 1_400 * Self.ms, final: true, now: 1_400 * Self.ms,
            symbols: TableResolver())
        let cause = try #require(report.cause)
        #expect(cause.evidence.contains { $0.contains("waited 48 ms for a CPU") }, "\(cause.evidence)")
        #expect(cause.kind == .starved, "\(cause)")
    }
}

extension StallReportBuilderTests {
    /// A stall a capture saw end (the thread back in its idle wait) long before the final reading: the figures end
    /// at the last sample read by the end, not at that reading, which counts the thread's next piece of work.
    @Test func figuresEndByTheStallsEndWhenTheFinalReadingCameLongAfterIt() throws {
        var evidence = Self.onCPUEvidence()
        evidence.stallStartSchedule = ThreadSchedule(
            cpuNanos: 500 * Self.ms, runQueueWaitNanos: 0, monotonicNanos: 1_000 * Self.ms)
        evidence.samples[0].probe?.cpuNanos = 502 * Self.ms
        evidence.samples[0].probe?.runQueueWaitNanos = 240 * Self.ms
        evidence.samples[1].probe?.cpuNanos = 503 * Self.ms
        evidence.samples[1].probe?.runQueueWaitNanos = 290 * Self.ms
        // Read 370 ms after the end, once the thread had run 150 ms of its next work.
        var next = Self.probe(cpuMs: 650)
        next.runQueueWaitNanos = 300 * Self.ms
        evidence.lastProbe = (next, 1_700 * Self.ms)
        let report = Self.builder().build(
            evidence, status: .ended, endNanos: 1_330 * Self.ms, final: true, now: 1_700 * Self.ms,
            symbols: TableResolver())
        let cause = try #require(report.cause)
        #expect(cause.kind == .starved, "\(cause)")
        #expect(cause.evidence.contains { $0.contains("waited 290 ms for a CPU") }, "\(cause.evidence)")
    }

    /// A niced loop that ran 18 ms of its work and was then preempted for seconds: the kernel's run-queue figure
    /// has none of that wait yet (it is added once the thread runs), and every capture timed out (a thread with no
    /// CPU cannot reach the stop). The reading's own measure of the wait under way makes it starved.
    static func preemptedEvidence(queuedAtEnd: UInt64?, waitedBeforeMs: UInt64 = 0) -> StallEvidence {
        var evidence = StallEvidence(
            stall: stall, threadID: 42, reportID: "r1", wallAtBegin: 1_790_000_000_000 * ms, monoAtBegin: 1_260 * ms,
            intervalNanos: 500 * ms)
        evidence.stallStartSchedule = ThreadSchedule(
            cpuNanos: 500 * ms, runQueueWaitNanos: 0, monotonicNanos: 1_000 * ms)
        var queued = probe(cpuMs: 518)
        queued.runQueueWaitNanos = waitedBeforeMs * ms
        evidence.firstProbe = queued
        evidence.samples = stride(from: 260, through: 3_260, by: 500).map { offset in
            var sample = StallEvidence.Sample(offsetNanos: UInt64(offset) * ms, frames: [], probe: queued)
            sample.unstopped = .timedOut
            return sample
        }
        var last = queued
        last.queuedNanos = queuedAtEnd
        evidence.lastProbe = (last, 4_300 * ms)
        return evidence
    }

    @Test func aLoopStillWaitingForACPUAtTheFinalReadingCountsThatWait() throws {
        let report = Self.builder().build(
            Self.preemptedEvidence(queuedAtEnd: 3_280 * Self.ms), status: .ended, endNanos: 4_300 * Self.ms,
            final: true, now: 4_300 * Self.ms, symbols: TableResolver())
        let cause = try #require(report.cause)
        #expect(cause.kind == .starved, "\(cause)")
        #expect(cause.evidence.contains { $0.contains("waited 3280 ms for a CPU") }, "\(cause.evidence)")
    }

    /// Without the reading's own measure (no kernel stack to read), the readings that found the thread runnable
    /// with its figures unchanged bound the wait from below: 3 040 ms since the first of them, after the 100 ms the
    /// kernel counted before it.
    @Test func withoutItsMeasureTheWaitUnderWayIsAtLeastTheTimeSinceTheFirstUnchangedReading() throws {
        let report = Self.builder().build(
            Self.preemptedEvidence(queuedAtEnd: nil, waitedBeforeMs: 100), status: .ended, endNanos: 4_300 * Self.ms,
            final: true,
            now: 4_300 * Self.ms, symbols: TableResolver())
        let cause = try #require(report.cause)
        #expect(cause.kind == .starved, "\(cause)")
        #expect(cause.evidence.contains { $0.contains("waited 3140 ms for a CPU") }, "\(cause.evidence)")
    }

    /// A niced loop seen from outside, runnable at the stall's start, at both samples and at the end, that never
    /// slept (its voluntary switches moved by no more than the captures' stops) and ran 5 ms in 376 ms: the kernel
    /// had counted none of its wait for a CPU yet (it adds a wait once the thread runs) and the wait under way could
    /// not be read, but a thread that never slept was on a CPU, stopped, or waiting for one.
    static func neverSleptEvidence(switchesAtEnd: UInt64) -> StallEvidence {
        var evidence = onCPUEvidence()
        var start = ThreadSchedule(cpuNanos: 500 * ms, runQueueWaitNanos: 0, monotonicNanos: 1_000 * ms)
        start.runnable = true
        start.voluntarySwitches = 3
        evidence.stallStartSchedule = start
        evidence.firstProbe = probe(cpuMs: 503)
        evidence.samples[0].probe = probe(cpuMs: 503)
        evidence.samples[1].probe = probe(cpuMs: 505)
        var last = probe(cpuMs: 505)
        last.voluntarySwitches = switchesAtEnd
        evidence.lastProbe = (last, 1_376 * ms)
        return evidence
    }

    @Test func aRunnableLoopThatNeverSleptWaitedForACPUWheneverItDidNotRun() throws {
        let report = Self.builder().build(
            Self.neverSleptEvidence(switchesAtEnd: 7), status: .ended, endNanos: 1_376 * Self.ms, final: true,
            now: 1_376 * Self.ms, symbols: TableResolver())
        let cause = try #require(report.cause)
        #expect(cause.kind == .starved, "\(cause)")
        // 376 ms less 5 ms of CPU and the captures' stops (60 µs, and as long again for the snapshot's).
        #expect(cause.evidence.contains { $0.contains("waited 370 ms for a CPU") }, "\(cause.evidence)")
    }

    @Test func aLoopThatSleptBetweenItsReadingsIsNotCreditedWithAWaitForACPU() throws {
        let report = Self.builder().build(
            Self.neverSleptEvidence(switchesAtEnd: 30), status: .ended, endNanos: 1_376 * Self.ms, final: true,
            now: 1_376 * Self.ms, symbols: TableResolver())
        let cause = try #require(report.cause)
        #expect(cause.kind != .starved, "\(cause)")
        #expect(!cause.evidence.contains { $0.contains("waited 370 ms") }, "\(cause.evidence)")
    }

}
