// The starved verdict: a loop held up by the machine, not by its own code; and CPU figures bounded.
import CStallWatchCore
import Foundation
import StallWatchTestSupport
import Testing

@testable import StallWatch

#if canImport(Glibc)
    import Glibc
#endif

@Suite(.offPool) struct StarvationVerdictTests {
    static func evidence(cpuMs: UInt64, runQueueMs: UInt64?, wallMs: UInt64 = 1000) -> CauseClassifier.Evidence {
        let running = CauseClassifier.Observation(state: "R", syscall: nil, wchan: nil, symbols: ["handleRequest"])
        var e = CauseClassifier.Evidence(
            loopThreadID: 1, observations: Array(repeating: running, count: 10), wallNanos: wallMs * 1_000_000,
            loopCPUNanos: cpuMs * 1_000_000, threads: [])
        e.loopRunQueueWaitNanos = runQueueMs.map { $0 * 1_000_000 }
        e.thresholdNanos = 250_000_000
        return e
    }

    @Test func aLoopThatMostlyWaitedForACPUIsStarvedNotCPUBound() {
        let cause = CauseClassifier.classify(Self.evidence(cpuMs: 5, runQueueMs: 900))
        #expect(cause.kind == .starved)
        #expect(cause.evidence.contains { $0.contains("waited 900 ms for a CPU") })
    }

    @Test func aCPUStallThatGotItsShareUnderOversubscriptionIsStillCPU() {
        #expect(CauseClassifier.classify(Self.evidence(cpuMs: 480, runQueueMs: 500)).kind == .cpu)
        #expect(CauseClassifier.classify(Self.evidence(cpuMs: 950, runQueueMs: 20)).kind == .cpu)
        #expect(CauseClassifier.classify(Self.evidence(cpuMs: 950, runQueueMs: nil)).kind == .cpu)
    }

    /// Its own work — the stall without the run-queue wait — would have crossed the threshold by itself: a stall
    /// of its own, slowed by the machine.
    @Test func aLoopWhoseOwnWorkCrossesTheThresholdIsCPUBoundEvenWhenItWaitedLongerForACPU() {
        #expect(CauseClassifier.classify(Self.evidence(cpuMs: 380, runQueueMs: 600)).kind == .cpu)
    }

    /// 800 ms of 1000 in the run queue, 200 ms of its own: without the wait, no stall.
    @Test func aLoopWhoseOwnWorkStaysUnderTheThresholdIsStarvedWhenItMostlyWaited() {
        let cause = CauseClassifier.classify(Self.evidence(cpuMs: 150, runQueueMs: 800))
        #expect(cause.kind == .starved)
        #expect(cause.evidence.contains { $0.contains("would have been about 200 ms, under the 250 ms threshold") })
    }

    /// The run queue covers the whole span; a sample is one moment. A thread caught in a call (a write copying into
    /// the page cache, a moment of disk sleep) that waited for a CPU for most of the stall was starved.
    @Test func aLoopThatMostlyWaitedForACPUIsStarvedWhateverCallItWasSampledIn() {
        var e = Self.evidence(cpuMs: 5, runQueueMs: 900)
        e.observations = Array(
            repeating: CauseClassifier.Observation(state: "D", syscall: 74, wchan: nil), count: 10)
        #expect(CauseClassifier.classify(e).kind == .starved)
    }

    /// A stall that ended before any sample still has the kernel's figures from about its start: most of it spent
    /// waiting for a CPU, with little work of its own, is the machine's doing; otherwise nothing is known.
    @Test func aStallWithNoSampleIsStarvedOnlyWhenFiguresCoveringMostOfItShowARunQueueWait() {
        var waited = Self.evidence(cpuMs: 2, runQueueMs: 95, wallMs: 104)
        waited.observations = []
        waited.stallNanos = 110_000_000
        waited.thresholdNanos = 100_000_000
        let starved = CauseClassifier.classify(waited)
        #expect(starved.kind == .starved)
        #expect(starved.evidence.contains("no sample of the loop thread's state"))
        var slept = waited
        slept.loopRunQueueWaitNanos = 3_000_000
        #expect(CauseClassifier.classify(slept).kind == .unknown)
        // Figures of only the stall's last few milliseconds say nothing of the rest.
        var glimpse = Self.evidence(cpuMs: 0, runQueueMs: 2, wallMs: 3)
        glimpse.observations = []
        glimpse.stallNanos = 110_000_000
        glimpse.thresholdNanos = 100_000_000
        #expect(CauseClassifier.classify(glimpse).kind == .unknown)
    }

    @Test func aLoopBlockedInACallThatHadItsCPUIsNotStarved() {
        var e = Self.evidence(cpuMs: 5, runQueueMs: 40)
        e.observations = Array(
            repeating: CauseClassifier.Observation(state: "D", syscall: 74, wchan: nil), count: 10)
        #expect(CauseClassifier.classify(e).kind == .io)
    }

    /// In-process the figures start at the first sample, a threshold into the stall: the loop's own work is
    /// estimated over the whole stall from their shares.
    @Test func theOwnWorkIsJudgedOverTheWholeStallWhenTheFiguresCoverItsLaterPart() {
        // 700 ms measured (from the first sample) of a 950 ms stall: 60% waiting.
        var short = Self.evidence(cpuMs: 200, runQueueMs: 420, wallMs: 700)
        short.stallNanos = 950_000_000
        // Own work about 380 ms over the whole stall: its own stall, not starvation.
        #expect(CauseClassifier.classify(short).kind == .cpu)
        var mostlyWaiting = Self.evidence(cpuMs: 60, runQueueMs: 620, wallMs: 700)
        mostlyWaiting.stallNanos = 950_000_000
        #expect(CauseClassifier.classify(mostlyWaiting).kind == .starved)
    }

    /// A loop sampled in a call has evidence of a wait of its own: the part of the stall before the figures begin
    /// counts as its own work, not as more of the measured shares. 600 ms of fsync, 210 ms measured in the run queue
    /// of the last 330 ms: up to 390 ms its own, over the threshold.
    @Test func aLoopSampledInACallIsStarvedOnlyOnWhatWasMeasured() {
        var e = Self.evidence(cpuMs: 15, runQueueMs: 210, wallMs: 330)
        e.stallNanos = 600_000_000
        e.observations = Array(
            repeating: CauseClassifier.Observation(state: "D", syscall: 74, wchan: nil), count: 10)
        #expect(CauseClassifier.classify(e).kind == .io)
        // Sampled runnable, the same figures are the machine's.
        e.observations = Self.evidence(cpuMs: 15, runQueueMs: 210).observations
        #expect(CauseClassifier.classify(e).kind == .starved)
    }

    @Test func cgroupThrottlingOrALateWatcherForMuchOfTheStallIsStarvation() {
        var throttled = Self.evidence(cpuMs: 20, runQueueMs: 100)
        throttled.throttledNanos = 600_000_000
        #expect(CauseClassifier.classify(throttled).kind == .starved)
        var late = Self.evidence(cpuMs: 10, runQueueMs: 100)
        late.lateWakeupNanos = 500_000_000
        let cause = CauseClassifier.classify(late)
        #expect(cause.kind == .starved)
        #expect(cause.evidence.contains { $0.contains("woke 500 ms late") })
    }

    /// A loop asleep in an event wait (a nested epoll) while the watcher woke 394 ms late: its own figures (115 ms in
    /// the run queue, no CPU, of 1116 ms) say it did not want a CPU, so the machine's busyness is no verdict.
    @Test func aLateWatcherDoesNotMakeALoopAsleepInAnEventWaitStarved() {
        var e = Self.evidence(cpuMs: 0, runQueueMs: 115, wallMs: 1116)
        e.lateWakeupNanos = 394_000_000
        e.observations = Array(
            repeating: CauseClassifier.Observation(state: "S", syscall: 232, wchan: "ep_poll"), count: 10)
        #expect(CauseClassifier.classify(e).kind != .starved)
        // Waiting for a CPU for most of it, the same wait is the machine's.
        var runnable = Self.evidence(cpuMs: 0, runQueueMs: 700, wallMs: 1116)
        runnable.lateWakeupNanos = 394_000_000
        runnable.observations = e.observations
        #expect(CauseClassifier.classify(runnable).kind == .starved)
    }

    @Test func processCPUPercentIsBoundedByTheCPUCountAndMeasuredOverTheRealInterval() {
        let probe = SystemContextProbe(pid: getpid(), loopThreadID: Int32(getpid()), monotonicNanos: 0)
        // An end time before the start snapshot (a stall's end read earlier than the last look) must not
        // shrink the interval to nothing.
        let context = probe.finish(monotonicNanos: 1)
        let bound = Double((context.cpuCount ?? 1) * 100)
        #expect((context.processCpuPercent ?? 0) <= bound)
        #expect((context.loopCpuPercent ?? 0) <= 100)
    }

    /// Ten samples in uninterruptible sleep outside any system call (page faults), over a 1 s stall with 5 ms of CPU
    /// and no run-queue wait; the disk busy `busyShare` of it, moving `diskMiB`, `processMiB` of them the process's.
    static func pageFaults(busyShare: Double, diskMiB: UInt64, processMiB: UInt64?) -> CauseClassifier.Evidence {
        var e = evidence(cpuMs: 5, runQueueMs: 0)
        var fault = CauseClassifier.Observation(state: "D", syscall: nil, wchan: "folio_wait_bit_common")
        fault.inPageFault = true
        e.observations = Array(repeating: fault, count: 10)
        e.disk = (busyShare, diskMiB << 20, processMiB.map { $0 << 20 })
        return e
    }

    @Test func aLoopFaultingInPagesWhileOtherProcessesKeptTheDiskBusyIsStarved() {
        let cause = CauseClassifier.classify(Self.pageFaults(busyShare: 0.97, diskMiB: 300, processMiB: 1))
        #expect(cause.kind == .starved)
        #expect(cause.evidence.contains { $0.hasPrefix("10 of 10 samples: in a page fault, not a system call") })
        #expect(
            cause.evidence.contains {
                $0 == "the disk was busy 97% of the stall moving 300 MiB, 299 MiB of it other processes' I/O (the "
                    + "process's own: 1 MiB): the machine held the loop up"
            })
    }

    /// A page fault on an idle disk, one whose bytes were mostly the process's own, or with no reading of the
    /// process's own I/O: the loop's own I/O, with the fault said.
    @Test func aPageFaultIsTheLoopsOwnIOWhenTheDiskWasIdleOrBusyWithTheProcesssOwnWrites() {
        for e in [
            Self.pageFaults(busyShare: 0.3, diskMiB: 300, processMiB: 1),
            Self.pageFaults(busyShare: 0.97, diskMiB: 300, processMiB: 200),
            Self.pageFaults(busyShare: 0.97, diskMiB: 10, processMiB: 0),
            Self.pageFaults(busyShare: 0.97, diskMiB: 300, processMiB: nil),
        ] {
            let cause = CauseClassifier.classify(e)
            #expect(cause.kind == .io)
            #expect(cause.evidence.contains { $0.hasPrefix("10 of 10 samples: in a page fault") })
        }
    }

    /// An fsync the loop asked for waits on the same busy disk, but it is the loop's own I/O.
    @Test func aSystemCallOnABusyDiskIsTheLoopsOwnIO() {
        var e = Self.pageFaults(busyShare: 0.97, diskMiB: 300, processMiB: 1)
        e.observations = Array(
            repeating: CauseClassifier.Observation(state: "D", syscall: 74, wchan: "folio_wait_bit_common"), count: 10)
        let cause = CauseClassifier.classify(e)
        #expect(cause.kind == .io)
        #expect(!cause.evidence.contains { $0.contains("page fault") })
    }

    /// 32 MiB written and synced by this process between the two readings: the process's own storage I/O counts
    /// them, and the busiest disk moved at least those 32 MiB. Written in the build directory, which is on the disk
    /// the package is checked out on (a temporary directory may be in memory).
    @Test func theContextCountsTheProcesssOwnDiskIOAndTheBusiestDisks() throws {
        let path = FileManager.default.currentDirectoryPath + "/.build/stallwatch-disk-\(getpid())"
        defer { try? FileManager.default.removeItem(atPath: path) }
        let probe = SystemContextProbe(pid: getpid(), loopThreadID: sw_gettid(), monotonicNanos: sw_monotonic_ns())
        let fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0o600)
        try #require(fd >= 0)
        let chunk = [UInt8](repeating: 0x5a, count: 1 << 20)
        for _ in 0..<32 { #expect(write(fd, chunk, chunk.count) == chunk.count) }
        #expect(fsync(fd) == 0)
        close(fd)
        let context = probe.finish(monotonicNanos: sw_monotonic_ns())
        let own = try #require(context.processDiskMiB)
        #expect(own >= 32)
        // The disk moved at least what this test synced. (Not the process's whole figure: other tests in this
        // process dirty pages meanwhile, counted at once, that reach the disk only later.)
        #expect(try #require(context.diskMiB) >= 32 * 0.9, "\(context)")
        #expect((0...100).contains(try #require(context.diskBusyPercent)))
    }

    @Test func wholeDisksAreReadFromDiskstatsWithoutPartitionsOrVirtualDevices() {
        let text = """
               7       0 loop0 10 0 80 0 0 0 0 0 0 5 0 0 0 0 0 0 0
             254       0 vda 2602129 95958 67348474 55197269 2526734 754909 4821593872 132675371 0 8396512 1963 0 0
             254       1 vda1 2601000 95000 67340000 55190000 2526000 754000 4821590000 132670000 0 8396000 1963 0 0
             253       0 zram0 4 0 32 0 0 0 0 0 0 0 0 0 0 0 0 0 0
               8       0 sdb 1 2
            """
        let disks = ProcSystem.parseDiskCounters(text) { !$0.hasSuffix("1") }
        #expect(disks == ["vda": .init(busyMillis: 8_396_512, bytes: (67_348_474 + 4_821_593_872) * 512)])
    }
}
