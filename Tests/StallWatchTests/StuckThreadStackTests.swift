// The stuck thread's stack in a stall's thread list when its first sample could not see it.
import CStallWatchCore
import Foundation
import StallWatchTestSupport
import Synchronization
import Testing

@testable import StallWatch

/// A sampler whose first `blind` samples find no stack (as for a thread working inside the kernel), and whose
/// later ones return a stack with the sample's index as its innermost address.
final class BlindFirstSampler: StackSampling {
    let blind: Int
    let count = Mutex(0)
    var captureMethod: CaptureMethod { "test" }

    init(blind: Int) { self.blind = blind }

    func sample(_ thread: SampledThread, configuration: StallWatchConfiguration) -> StackSample {
        let index = count.withLock { value in
            defer { value += 1 }
            return value
        }
        guard index >= blind else { return StackSample(error: "the thread did not stop", failure: "did not stop") }
        return StackSample(frames: [.programCounter(0x1000 + UInt64(index)), .returnAddress(0x2000)], pauseNanos: 1)
    }

    func sampleThread(id: Int32, configuration: StallWatchConfiguration) -> StackSample {
        StackSample(error: "not sampled in this test")
    }
}

/// A loop stuck in one phase on `thread` until the sampler has taken `samples` samples; it then turns once and ends.
struct StuckUntilSampled: ProgressSource {
    /// How many samples of the loop thread the sampler has taken.
    let taken: @Sendable () -> Int
    let thread: Int32
    let samples: Int
    let phaseStart = sw_monotonic_ns() &- 1_000_000_000

    init(sampler: BlindFirstSampler, thread: Int32, samples: Int) {
        self.init(taken: { sampler.count.withLock { $0 } }, thread: thread, samples: samples)
    }

    init(taken: @escaping @Sendable () -> Int, thread: Int32, samples: Int) {
        self.taken = taken
        self.thread = thread
        self.samples = samples
    }

    var sampledThread: SampledThread? { SampledThread(threadID: thread, stackLow: 0, stackHigh: 0) }
    var annotations: [String: String] { [:] }

    private var turned = false

    mutating func read(now: UInt64) -> ProgressReading {
        guard !turned else { return .ended(reason: nil) }
        guard taken() >= samples else {
            return .progress(LoopSnapshot(sequence: 1, activity: .afterWaiting, phaseStartNanos: phaseStart))
        }
        turned = true
        return .progress(LoopSnapshot(sequence: 2, activity: .beforeWaiting, phaseStartNanos: now))
    }

    func wait(for wait: StallDetector.Wait, nextSampleAt: UInt64?) -> Bool {
        while let due = nextSampleAt, sw_monotonic_ns() < due { sched_yield() }
        return true
    }
}

@Suite(.offPool) struct StuckThreadStackTests {
    /// Follows one stall of a loop on a parked thread of this process whose first `blind` samples have no stack.
    static func report(blind: Int, samples: Int, directory: String) throws -> StallReport {
        let parked = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let tid = Mutex<Int32>(0)
        let thread = Thread {
            tid.withLock { $0 = sw_gettid() }
            parked.signal()
            release.wait()
        }
        thread.start()
        parked.wait()
        defer { release.signal() }
        let sampler = BlindFirstSampler(blind: blind)
        let source = StuckUntilSampled(sampler: sampler, thread: tid.withLock { $0 }, samples: samples)
        let reports = try Self.follow(source, sampler: sampler, maxThreads: 1, directory: directory)
        try #require(reports.count == 1, "\(reports.map(\.id))")
        return reports[0]
    }

    /// Follows `source`'s stalls to their end with `sampler`, sampling every 2 ms; returns the reports written.
    static func follow(
        _ source: StuckUntilSampled, sampler: any StackSampling, maxThreads: Int? = nil, directory: String
    ) throws -> [StallReport] {
        var configuration = StallWatchConfiguration()
        configuration.reportDirectory = directory
        if let maxThreads { configuration.maxThreads = maxThreads }
        configuration.symbolication = .off
        configuration.sampleIntervalMs = 2
        let recorder = StallRecorder(
            configuration: configuration, loopName: "stuck",
            target: .init(
                processID: getpid(), detectionSource: "test", sampler: sampler, process: ProcessIdentity.current,
                phaseKnown: true),
            emit: { _ in })
        var follower = StallFollower(
            source: source, recorder: recorder, configuration: configuration.detectorConfiguration,
            watcher: .watchdog)
        #expect(follower.run(while: { true }) == .sourceEnded)
        recorder.flush()
        return try Fixtures.reports(in: directory)
    }

    @Test func aFirstSampleWithoutAStackIsStoodInForByTheFirstLaterSampleWithOne() throws {
        let directory = Fixtures.temporaryDirectory("blind-first-sample")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let report = try Self.report(blind: 2, samples: 4, directory: directory)
        #expect(report.samples.first?.frames.isEmpty == true, "\(report.samples.map(\.frames.count)) \(report.status)")
        let stuck = try #require(report.threads?.first)
        #expect(stuck.threadId == report.loop.threadId)
        // Sample 2 is the first with a stack: its innermost address is 0x1002.
        #expect(
            stuck.frames.first?.address == 0x1002,
            "\(report.samples.map(\.frames.count)) \(report.status) \(report.notes)")
        #expect(stuck.error == nil)
        #expect(
            report.notes.contains {
                $0.hasPrefix("the stuck thread's first sample has no stack") && $0.contains("sample 2")
            })
    }

    @Test func aStuckThreadNeverSeenKeepsAnEmptyStackAndItsError() throws {
        let directory = Fixtures.temporaryDirectory("blind-every-sample")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let report = try Self.report(blind: .max, samples: 3, directory: directory)
        let stuck = try #require(report.threads?.first)
        #expect(stuck.frames.isEmpty)
        #expect(stuck.error == "the thread did not stop")
        #expect(!report.notes.contains { $0.hasPrefix("the stuck thread's first sample has no stack") })
    }
}

/// A sampler of a loop thread that waits for a lock, whose first capture of each other thread fails (a loaded
/// machine left it no time) and whose later ones give a two-frame stack.
final class FirstThreadCaptureFailsSampler: StackSampling {
    let tries = Mutex<[Int32: Int]>([:])
    /// Samples of the loop thread taken.
    let samples = Mutex(0)
    var captureMethod: CaptureMethod { "test" }

    func sample(_ thread: SampledThread, configuration: StallWatchConfiguration) -> StackSample {
        samples.withLock { $0 += 1 }
        return StackSample(frames: [.programCounter(0x1000), .returnAddress(0x2000)], pauseNanos: 1)
    }

    func sampleThread(id: Int32, configuration: StallWatchConfiguration) -> StackSample {
        let attempt = tries.withLock { counts in
            defer { counts[id, default: 0] += 1 }
            return counts[id, default: 0]
        }
        guard attempt > 0 else { return StackSample(error: "the capture timed out", failure: "timed out") }
        return StackSample(frames: [.programCounter(0x3000), .returnAddress(0x4000)], pauseNanos: 1)
    }
}

extension StuckThreadStackTests {
    /// The thread holding the lock the stuck loop waits for is the stack a reader wants most: a first capture of it
    /// that failed is taken again while the stall lasts; other threads keep their one try.
    @Test func aLockHoldersFailedCaptureIsTakenAgain() throws {
        let directory = Fixtures.temporaryDirectory("holder-capture-again")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let lock = Mutex(0)
        let held = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let done = DispatchSemaphore(value: 0)
        let ids = Mutex<(holder: Int32, waiter: Int32)>((0, 0))
        Thread {
            lock.withLock { _ in
                ids.withLock { $0.holder = sw_gettid() }
                held.signal()
                release.wait()
            }
            done.signal()
        }.start()
        held.wait()
        Thread {
            ids.withLock { $0.waiter = sw_gettid() }
            lock.withLock { _ in }
            done.signal()
        }.start()
        defer {
            release.signal()
            done.wait()
            done.wait()
        }
        // The waiter is in its futex wait for the lock (Swift's Mutex records its owner's thread id in the word).
        #expect(
            pollUntil {
                let waiter = ids.withLock { $0.waiter }
                return waiter != 0 && ProcDirectory(processID: getpid(), threadID: waiter).syscall()?.number == 202
            })
        let (holder, waiter) = ids.withLock { $0 }
        let sampler = FirstThreadCaptureFailsSampler()
        let source = StuckUntilSampled(taken: { sampler.samples.withLock { $0 } }, thread: waiter, samples: 3)
        let report = try #require(try Self.follow(source, sampler: sampler, directory: directory).first)
        let threads = try #require(report.threads)
        let holding = try #require(threads.first { $0.threadId == holder }, "\(threads.map(\.threadId))")
        #expect(holding.frames.first?.address == 0x3000, "\(holding)")
        #expect(holding.error?.contains("taken again") == true, "\(String(describing: holding.error))")
        #expect(sampler.tries.withLock { $0[holder] } == 2)
        // A thread that holds nothing keeps its one try (this test's own thread, for one).
        let others = sampler.tries.withLock { $0 }.filter { $0.key != holder }
        #expect(!others.isEmpty && others.values.allSatisfy { $0 == 1 }, "\(others)")
    }
}

/// A sampler whose first capture wakes the sampled thread out of its futex wait into a spin in user space before
/// it returns, as a stop can leave a thread on a loaded machine: runnable, on its way back into its wait.
final class WakesTheThreadSampler: StackSampling {
    let wake = DispatchSemaphore(value: 0)
    let spinning = Atomic<Bool>(false)
    let samples = Mutex(0)
    var captureMethod: CaptureMethod { "test" }

    func sample(_ thread: SampledThread, configuration: StallWatchConfiguration) -> StackSample {
        let first = samples.withLock { count in
            defer { count += 1 }
            return count == 0
        }
        if first {
            wake.signal()
            _ = pollUntil { spinning.load(ordering: .acquiring) }
        }
        return StackSample(frames: [.programCounter(0x1000), .returnAddress(0x2000)], pauseNanos: 1)
    }

    func sampleThread(id: Int32, configuration: StallWatchConfiguration) -> StackSample {
        StackSample(error: "not sampled in this test")
    }
}

extension StuckThreadStackTests {
    /// Read as it runs again after the first sample, the stuck thread is listed in the call its first sample's
    /// probe saw it in, not as running.
    @Test func theStuckThreadSeenOutOfItsCallAfterTheFirstSampleIsListedInThatCall() throws {
        let directory = Fixtures.temporaryDirectory("stuck-thread-listed-in-its-call")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let sampler = WakesTheThreadSampler()
        let stop = Atomic<Bool>(false)
        let tid = Atomic<Int32>(0)
        let done = DispatchSemaphore(value: 0)
        Thread {
            tid.store(sw_gettid(), ordering: .releasing)
            sampler.wake.wait()
            sampler.spinning.store(true, ordering: .releasing)
            while !stop.load(ordering: .relaxed) {}
            done.signal()
        }.start()
        defer {
            stop.store(true, ordering: .relaxed)
            done.wait()
        }
        #expect(
            pollUntil {
                let thread = tid.load(ordering: .acquiring)
                return thread != 0 && ProcDirectory(processID: getpid(), threadID: thread).syscall()?.number == 202
            })
        let thread = tid.load(ordering: .acquiring)
        let source = StuckUntilSampled(taken: { sampler.samples.withLock { $0 } }, thread: thread, samples: 3)
        let report = try #require(try Self.follow(source, sampler: sampler, directory: directory).first)
        let listed = try #require(report.threads?.first)
        #expect(listed.threadId == thread)
        #expect(listed.syscall == "futex", "\(listed)")
    }
}
