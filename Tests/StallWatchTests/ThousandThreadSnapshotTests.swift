// The all-threads snapshot of a process with a thousand threads does not black out the stall's sampling.
import CStallWatchPtrace
import Foundation
import StallWatchTestSupport
import Synchronization
import Testing

@testable import StallWatch

extension StressTests {
    @Suite(.offPool, .serialized) struct ThousandThreadSnapshotTests {
        /// `count` threads parked in a futex wait until `release` is signalled `count` times.
        static func parkThreads(_ count: Int, release: DispatchSemaphore) -> [Thread] {
            let started = DispatchSemaphore(value: 0)
            let threads = (0..<count).map { index in
                let thread = Thread {
                    started.signal()
                    release.wait()
                }
                thread.stackSize = 256 << 10
                thread.name = "parked-\(index)"
                thread.start()
                return thread
            }
            for _ in 0..<count { started.wait() }
            return threads
        }

        /// One stall of 4 s among the parked threads, with a snapshot of every thread; its report, and how long the
        /// sampling side (the watching thread and the capture helper) waited for a CPU from the watchdog's start to
        /// the stall's end. The snapshot stops where the stall ends (threads read after it would show the state after
        /// it), and alone it takes 1.3–2 s: the stall outlasts it.
        static func stallOnce() throws -> (report: StallReport?, waitedForACPUMs: Double) {
            let directory = Fixtures.temporaryDirectory("thousand")
            defer { try? FileManager.default.removeItem(atPath: directory) }
            var configuration = StallWatchConfiguration()
            configuration.reportDirectory = directory
            configuration.thresholdMs = 100
            configuration.sampleIntervalMs = 20
            configuration.maxSamples = 500
            configuration.maxThreads = 1100  // every thread: the snapshot itself takes far longer than 100 ms
            let loop = try EventLoop(name: "thousand", mainQueue: .disabled)
            let ended = DispatchSemaphore(value: 0)
            let watchdog = Watchdog(loop: loop, configuration: configuration) { if case .ended = $0 { ended.signal() } }
            try watchdog.start()
            _ = startLoopThread(loop)
            let watching = Self.threads(named: "stallwatch-watc")
            let waitedBefore = watching.compactMap { Self.runQueueWaitNanos(pid: getpid(), tid: $0) }.reduce(0, +)
            // The watching thread took the real-time class from its creator (the test's thread, when it is in it).
            if sched_getscheduler(0) == SCHED_FIFO {
                #expect(
                    !watching.isEmpty && watching.allSatisfy { sched_getscheduler($0) == SCHED_FIFO },
                    "the watching thread \(watching) is not in the real-time class")
            }
            loop.perform { Self.stuckAmongAThousandThreads(milliseconds: 4000) }
            #expect(ended.wait(timeout: .now() + 60) == .success)
            // The helper is a process of its own, started by the stall's first capture.
            let helper = sw_helper_pid()
            let waited =
                watching.compactMap { Self.runQueueWaitNanos(pid: getpid(), tid: $0) }.reduce(0, +) - waitedBefore
                + (helper > 0 ? Self.runQueueWaitNanos(pid: helper, tid: helper) ?? 0 : 0)
            loop.stop()
            watchdog.stop()
            return (try Fixtures.reports(in: directory).first, Double(waited) / 1e6)
        }

        /// A thread's wait for a CPU so far (`schedstat`), in nanoseconds.
        static func runQueueWaitNanos(pid: Int32, tid: Int32) -> UInt64? {
            ProcDirectory(processID: pid, threadID: tid).schedstat(now: 0)?.runQueueWaitNanos
        }

        /// The threads of this process whose name (as the kernel keeps it, 15 bytes) is `name`.
        static func threads(named name: String) -> [Int32] {
            let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
            return tasks.compactMap { task in
                let comm = try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8)
                return comm?.trimmingCharacters(in: .newlines) == name ? Int32(task) : nil
            }
        }

        static func widestGap(_ report: StallReport) -> Double {
            let offsets = report.samples.map(\.offsetMs)
            return zip(offsets.dropFirst(), offsets).map { $0 - $1 }.max() ?? .infinity
        }

        /// The snapshot captures every thread of the test process through the capture helper (a ptrace stop: no
        /// handler runs, no blocking call fails) or, for a thread in a call that even a stop would cut short, from
        /// its frozen stack. Alone it takes 1.3–2 s; beside the other suites, a thousand threads of theirs to stop
        /// one after the other (and a thousand more to create) slowed the whole test process for a minute, so it
        /// runs in a test process of its own (``StressTests``).
        ///
        /// The bar is the snapshot's interleaving, not the machine's: on a machine whose CPUs other work keeps busy
        /// (a loaded CI machine, `scripts/load.sh`), every capture waits for a CPU three times (the watching thread,
        /// the helper, the stopped thread), and one capture between two samples took the gap past 100 ms. So every
        /// thread of the stall — the loop, the parked threads, the watchdog and the helper it clones, all created
        /// from this one — runs in the real-time class (`SCHED_FIFO`, priority 1, inherited at creation), which
        /// other work does not take the CPU from; none of them spins.
        @Test(.timeLimit(.minutes(2)))
        func aThousandThreadsLeaveNoGapOver100msInTheLoopSamplesAndTheLoopFunctionIsNamed() throws {
            var saved = sched_param()
            var savedPolicy: Int32 = 0
            try #require(pthread_getschedparam(pthread_self(), &savedPolicy, &saved) == 0)
            var realTime = sched_param(sched_priority: 1)
            try #require(
                pthread_setschedparam(pthread_self(), SCHED_FIFO, &realTime) == 0,
                "the real-time class needs CAP_SYS_NICE: run the stress tests as root")
            defer { _ = pthread_setschedparam(pthread_self(), savedPolicy, &saved) }
            let release = DispatchSemaphore(value: 0)
            let parked = Self.parkThreads(1000, release: release)
            defer { for _ in parked { release.signal() } }
            // Without interleaving, the gap is the whole snapshot (seconds) every time.
            let (stalled, waitedForACPUMs) = try Self.stallOnce()
            let report = try #require(stalled)
            let threads = report.threads ?? []
            #expect(threads.count >= 1000, "the snapshot covered the threads: \(threads.count)")
            let offsets = report.samples.map(\.offsetMs)
            #expect(offsets.count >= 10, "\(offsets.count) samples")
            // The real-time class is not all of the CPU: the kernel keeps a share of each second for the other
            // threads (RT throttling, the fair server), and the sampling side's wait for a CPU, measured by the
            // kernel, is the machine's part of a gap.
            let widest = Self.widestGap(report)
            #expect(
                widest < 100 + waitedForACPUMs,
                """
                widest gap between loop samples: \(widest) ms, the sampling side waited \(waitedForACPUMs) ms for a \
                CPU in all, over \(offsets.count) samples: \(offsets)
                """)
            let named = report.samples.filter { sample in
                sample.frames.contains { $0.symbol?.contains("stuckAmongAThousandThreads") == true }
            }
            #expect(
                named.count * 2 >= report.samples.count, "\(named.count) of \(report.samples.count) name the function")
        }

        @inline(never)
        static func stuckAmongAThousandThreads(milliseconds: Int) {
            WatchdogTests.blockLoopThread(milliseconds: milliseconds)
        }
    }
}
