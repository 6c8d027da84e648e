// The in-process named-thread watcher started while a loop sits in an idle wait that looks busy: withdrawn once it turns.
import CStallWatchCore
import Dispatch
import Foundation
import StallWatchTestSupport
import Synchronization
import Testing

@testable import StallWatch

#if canImport(Glibc)
    import Glibc
#endif

@Suite(.offPool, .serialized) struct ThreadWatchdogWithdrawalTests {
    /// A loop of this process whose event source is a pipe it reads with a blocking read: each byte is one event,
    /// 5 ms of CPU time of work (or what `work` does with the byte), then the next read; 0 ends it.
    final class PipeReadLoop: @unchecked Sendable {  // `fds` are set before the thread starts; the rest is atomic.
        let threadID = Atomic<Int32>(0)
        let turns = Atomic<Int>(0)
        /// With `heldOffOnCPU`: the thread is back at nice 0 after its first turn.
        let restored = Atomic<Bool>(false)
        var fds: [Int32] = [0, 0]
        private let done = DispatchSemaphore(value: 0)

        /// `heldOffOnCPU`: until its first turn is done, the loop thread runs on that CPU alone at nice 19 (any other
        /// thread there keeps it waiting); then at nice 0 again (CAP_SYS_NICE: the suite runs as root), on every CPU.
        init(name: String, heldOffOnCPU cpu: Int32? = nil, work: (@Sendable (UInt8) -> Void)? = nil) throws {
            try #require(pipe(&fds) == 0)
            let readEnd = fds[0]
            Thread { [self] in
                setCurrentThreadName(name)
                var saved = [UInt8](repeating: 0, count: 128)
                let which = __priority_which_t(PRIO_PROCESS.rawValue)
                if let cpu {
                    _ = sw_pin_to_cpu(cpu, &saved, 128)
                    _ = setpriority(which, id_t(sw_gettid()), 19)
                }
                threadID.store(sw_gettid(), ordering: .releasing)
                var byte: UInt8 = 0
                while read(readEnd, &byte, 1) == 1, byte != 0 {
                    if let work {
                        work(byte)
                    } else {
                        let end = Self.threadCPUNanos() + 5_000_000
                        while Self.threadCPUNanos() < end {}
                    }
                    if cpu != nil, turns.load(ordering: .relaxed) == 0 {
                        restored.store(setpriority(which, id_t(sw_gettid()), 0) == 0, ordering: .releasing)
                        _ = sw_set_affinity(saved, 128)
                    }
                    turns.add(1, ordering: .releasing)
                }
                done.signal()
            }.start()
        }

        static func threadCPUNanos() -> UInt64 {
            var t = timespec()
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t)
            return UInt64(t.tv_sec) * 1_000_000_000 + UInt64(t.tv_nsec)
        }

        /// Returns once the loop thread has sat in its read for `nanos` (by this thread's clock): a watcher started
        /// then finds it there at its first look.
        func sitInRead(nanos: UInt64 = 0) {
            #expect(
                pollUntil {
                    let tid = threadID.load(ordering: .acquiring)
                    return tid != 0 && ProcDirectory(processID: getpid(), threadID: tid).syscall()?.number == 0
                })
            let readSince = sw_monotonic_ns()
            while sw_monotonic_ns() < readSince + nanos { usleep(10_000) }
        }

        /// Turns the loop (byte 1) until `events` has a withdrawn report of its thread — the read found at the first
        /// look, proved the loop's idle wait — at most five times; returns the turns taken.
        func turnUntilTheReadIsLearned(_ events: WatchedEvents) throws -> Int {
            let tid = threadID.load(ordering: .acquiring)
            let reported = { events.began.values.contains { $0.loop.threadId == tid } }
            let learned = { events.withdrawn.contains { $0.loop.threadId == tid } }
            try #require(
                pollUntil(timeout: .seconds(30), every: .milliseconds(10)) { reported() },
                "the read found at the first look was not reported")
            var turns = 0
            while !learned(), turns < 5 {
                send(1)
                turns += 1
                let done = turns
                #expect(pollUntil { self.turns.load(ordering: .acquiring) == done })
                _ = pollUntil(timeout: .seconds(2), every: .milliseconds(10)) { learned() }
            }
            let seen = events.ended.values.map { "\($0.status) \($0.notes)" }
            try #require(learned(), "the read was not withdrawn after \(turns) turns: \(seen)")
            return turns
        }

        func send(_ byte: UInt8) {
            var value = byte
            _ = write(fds[1], &value, 1)
        }

        func stop() {
            send(0)
            done.wait()
            close(fds[0])
            close(fds[1])
        }
    }

    /// What a thread watchdog of the tests reported.
    final class WatchedEvents: Sendable {
        let began = Recorder<StallReport>()
        /// Every report that ended, withdrawn ones included.
        let ended = Recorder<StallReport>()
        var withdrawn: [StallReport] { ended.values.filter { $0.status == .withdrawn } }
        var endedNotWithdrawn: [StallReport] { ended.values.filter { $0.status != .withdrawn } }

        /// A started thread watchdog of the threads named `pattern`, threshold 100 ms, its reports in `directory`.
        func watch(
            _ pattern: String, directory: String, configure: (inout StallWatchConfiguration) -> Void = { _ in }
        ) throws -> ThreadWatchdog {
            var config = StallWatchConfiguration()
            config.thresholdMs = 100
            config.reportDirectory = directory
            configure(&config)
            let watchdog = try ThreadWatchdog(threadsNamed: pattern, configuration: config) { [self] event in
                if case .began(let report) = event { began.append(report) }
                if case .ended(let report) = event { ended.append(report) }
            }
            try watchdog.start()
            return watchdog
        }
    }

    /// Started 500 ms (five thresholds) into the loop's read: one report, begun before watching; once the loop has
    /// worked and read again, that report is `withdrawn` (event and file); the read, now learned, gives no further
    /// report over another turn and 1 s (ten thresholds) of idling in it. With `firstTurnHeldOffTheCPU`, the turn
    /// that proves the read idle takes its 5 ms of CPU over many looks: the loop thread runs at nice 19 on a CPU
    /// that a spinning thread keeps busy until that turn is done.
    @Test(.timeLimit(.minutes(2)), arguments: [false, true])
    func anIdleReadTakenForAStallIsWithdrawnOnceTheLoopComesBackToIt(firstTurnHeldOffTheCPU: Bool) throws {
        let directory = Fixtures.temporaryDirectory("thread-watchdog-withdrawn")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let loop = try PipeReadLoop(name: "pipe-elt-0", heldOffOnCPU: firstTurnHeldOffTheCPU ? 0 : nil)
        defer { loop.stop() }
        loop.sitInRead(nanos: 500_000_000)
        let events = WatchedEvents()
        let (began, ended) = (events.began, events.ended)
        let watchdog = try events.watch("pipe-elt-*", directory: directory)
        defer { watchdog.stop() }
        try #require(
            pollUntil(timeout: .seconds(10), every: .milliseconds(10)) { !began.values.isEmpty },
            "the read was not reported at first")
        let spinning = Atomic<Bool>(firstTurnHeldOffTheCPU)
        let spun = DispatchSemaphore(value: 0)
        var turnClock: (wall: UInt64, cpu: UInt64)?
        if firstTurnHeldOffTheCPU {
            let onTheCPU = DispatchSemaphore(value: 0)
            Thread {
                var saved = [UInt8](repeating: 0, count: 128)
                _ = sw_pin_to_cpu(0, &saved, 128)
                onTheCPU.signal()
                while spinning.load(ordering: .relaxed) {}
                spun.signal()
            }.start()
            // The spinner holds CPU 0 before the turn is asked for.
            onTheCPU.wait()
            let tid = loop.threadID.load(ordering: .acquiring)
            let before = try #require(
                ProcDirectory(processID: getpid(), threadID: tid).schedstat(now: sw_monotonic_ns()))
            loop.send(1)
            #expect(pollUntil(timeout: .seconds(20)) { loop.turns.load(ordering: .acquiring) == 1 })
            let after = try #require(
                ProcDirectory(processID: getpid(), threadID: tid).schedstat(now: sw_monotonic_ns()))
            turnClock = (after.monotonicNanos - before.monotonicNanos, after.cpuNanos - before.cpuNanos)
            let restored = loop.restored.load(ordering: .acquiring)
            #expect(restored, "the loop thread could not go back to nice 0")
            spinning.store(false, ordering: .relaxed)
            spun.wait()
        } else {
            loop.send(1)
        }
        try #require(
            pollUntil(timeout: .seconds(10), every: .milliseconds(10)) { !ended.values.isEmpty },
            "the report did not end after the loop turned")
        if let turnClock {
            // The case's premise: the turn spanned many looks (50 ms apart) of the watcher.
            #expect(turnClock.wall > 200_000_000, "the held-off turn took \(turnClock.wall / 1_000_000) ms")
        }
        loop.send(1)
        #expect(pollUntil { loop.turns.load(ordering: .acquiring) == 2 })
        usleep(1_000_000)

        let describe = { (r: StallReport) in
            "\(r.id) \(r.status) \(r.durationMs) ms before-attach \(r.startedBeforeAttach ?? false) "
                + "\(r.cause?.kind.rawValue ?? "-") \(r.cause?.evidence ?? []): \(r.notes)"
        }
        let endings = "began: \(began.values.map(describe)); ended: \(ended.values.map(describe))"
        #expect(
            began.values.count == 1 && ended.values.count == 1,
            "\(began.values.count) began, \(ended.values.count) ended: \(endings)")
        let report = try #require(ended.values.first)
        #expect(report.status == .withdrawn)
        #expect(report.startedBeforeAttach == true)
        #expect(report.notes.contains { $0.hasPrefix("withdrawn:") }, "\(report.notes)")
        let files = try Fixtures.reports(in: directory)
        #expect(files.count == 1 && files.first?.status == .withdrawn, "\(files.map(\.status))")
    }
}
