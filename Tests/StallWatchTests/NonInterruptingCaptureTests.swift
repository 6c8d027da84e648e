// The embedded watchdog changes nothing for the loop it samples: blocking waits last their full time, no EINTR.
import CStallWatchCore
import CStallWatchFixtures
import Dispatch
import Foundation
import StallWatchTestSupport
import Synchronization
import Testing

@testable import StallWatch

@Suite(.offPool, .serialized) struct NonInterruptingCaptureTests {
    /// One blocking call of the loop: what it does, and a name its stack must show.
    struct Wait: Sendable, CustomTestStringConvertible {
        var name: String
        /// Lower-cased parts of a frame symbol that identify the call.
        var symbols: [String]
        /// Blocks for `ms`, returns the errno (0 when the call ran out its time as it should).
        var run: @Sendable (_ ms: Int) -> Int32
        var testDescription: String { name }
    }

    static let waits: [Wait] = [
        Wait(name: "poll", symbols: ["poll"]) { ms in
            var fds: [Int32] = [-1, -1]
            _ = pipe(&fds)
            defer { fds.forEach { close($0) } }
            var entry = pollfd(fd: fds[0], events: Int16(POLLIN), revents: 0)
            return poll(&entry, 1, Int32(ms)) < 0 ? errno : 0
        },
        Wait(name: "nanosleep", symbols: ["nanosleep"]) { ms in
            var request = timespec(tv_sec: ms / 1000, tv_nsec: (ms % 1000) * 1_000_000)
            return nanosleep(&request, nil) < 0 ? errno : 0
        },
        Wait(name: "usleep", symbols: ["usleep", "nanosleep"]) { ms in
            usleep(UInt32(ms) * 1000) < 0 ? errno : 0
        },
        Wait(name: "sem_timedwait", symbols: ["sem_timedwait", "sem_wait", "futex"]) { ms in
            var semaphore = sem_t()
            sem_init(&semaphore, 0, 0)
            defer { sem_destroy(&semaphore) }
            var deadline = timespec()
            clock_gettime(CLOCK_REALTIME, &deadline)
            let nanos = Int(deadline.tv_nsec) + (ms % 1000) * 1_000_000
            deadline.tv_sec += ms / 1000 + nanos / 1_000_000_000
            deadline.tv_nsec = nanos % 1_000_000_000
            let failure = sem_timedwait(&semaphore, &deadline) < 0 ? errno : 0
            return failure == ETIMEDOUT ? 0 : failure
        },
        Wait(name: "recv with SO_RCVTIMEO", symbols: ["recv"]) { ms in
            var pair: [Int32] = [-1, -1]
            _ = socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair)
            defer { pair.forEach { close($0) } }
            var timeout = timeval(tv_sec: ms / 1000, tv_usec: Int((ms % 1000) * 1000))
            setsockopt(pair[0], SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            var byte: UInt8 = 0
            let failure = recv(pair[0], &byte, 1, 0) < 0 ? errno : 0
            return failure == EAGAIN ? 0 : failure
        },
        Wait(name: "timed futex wait", symbols: ["sw_test_futex_wait"]) { ms in
            let word = UnsafeMutablePointer<UInt32>.allocate(capacity: 1)
            defer { word.deallocate() }
            word.pointee = 7
            let failure = sw_test_futex_wait(word, 7, UInt64(ms) * 1_000_000)
            return failure == ETIMEDOUT ? 0 : failure
        },
    ]

    @Test(.timeLimit(.minutes(3)), arguments: waits)
    func aBlockingWaitOnTheLoopLastsItsFullTimeWithoutEINTRAndTheReportNamesIt(_ wait: Wait) throws {
        let directory = Fixtures.temporaryDirectory("wait")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let thresholdMs = 200, waitMs = 600
        var config = StallWatchConfiguration()
        config.thresholdMs = thresholdMs
        config.sampleIntervalMs = 20
        config.maxThreads = 0
        config.reportDirectory = directory
        let loop = try EventLoop(name: "waits", mainQueue: .disabled)
        let ended = DispatchSemaphore(value: 0)
        let watchdog = Watchdog(loop: loop, configuration: config) { if case .ended = $0 { ended.signal() } }
        try watchdog.start()
        _ = startLoopThread(loop)
        let outcome = Mutex<(errno: Int32, ms: Double, runQueueMs: Double)?>(nil)
        loop.perform {
            // Time this thread spent waiting for a CPU (schedstat's second field): on a loaded machine the wake-up
            // at the end of the wait can come late, which is no restart of the call.
            func runQueueNanos() -> Double {
                let text = (try? String(contentsOfFile: "/proc/thread-self/schedstat", encoding: .utf8)) ?? ""
                return Double(text.split(separator: " ").dropFirst().first ?? "0") ?? 0
            }
            let queuedBefore = runQueueNanos()
            let start = DispatchTime.now().uptimeNanoseconds
            let failure = wait.run(waitMs)
            let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6
            outcome.withLock { $0 = (failure, elapsed, (runQueueNanos() - queuedBefore) / 1e6) }
        }
        #expect(ended.wait(timeout: .now() + 20) == .success)
        loop.stop()
        watchdog.stop()
        let result = try #require(outcome.withLock { $0 })
        #expect(result.errno == 0, "\(wait.name) failed with errno \(result.errno) after \(result.ms) ms")
        // A restarted call would last at least threshold + its full time again, far past 1.1×.
        let ranMs = result.ms - result.runQueueMs
        let report = try #require(try Fixtures.reports(in: directory).first)
        // On failure, how the captures held the thread (a stop that lasted is time neither run nor queued).
        let pauses =
            "\(report.samples.count) samples by \(report.capture.method), pause max "
            + "\(report.capture.pauseMicrosMax.map { "\($0) µs" } ?? "-"), errors \(report.capture.errors.prefix(3))"
        #expect(
            result.ms >= Double(waitMs) * 0.9 && ranMs <= Double(waitMs) * 1.1,
            "\(wait.name) took \(result.ms) ms, \(result.runQueueMs) ms of it waiting for a CPU; \(pauses)")
        #expect(report.capture.method == ThreadCaptureHelper.captureMethod)
        #expect(
            report.samples.count >= 3,
            "\(pauses); \(report.durationMs) ms, detected after \(report.detection.latencyMs) ms; notes \(report.notes)"
        )
        // Unwound past the wait into the loop that called it.
        let deepest = report.samples.map(\.frames.count).max() ?? 0
        #expect(deepest > 5, "at most \(deepest) frames: \(report.samples.first?.error ?? "")")
        let symbols = Set(report.samples.flatMap(\.frames).compactMap { $0.symbol?.lowercased() })
        #expect(
            symbols.contains { symbol in wait.symbols.contains { symbol.contains($0) } },
            "no frame names \(wait.name): \(symbols)")
    }

    @Test(.timeLimit(.minutes(3)))
    func theHelperIsInvisibleToWaitHoldsNoDescriptorOfOursAndBlocksEverySignal() throws {
        let helper = try ThreadCaptureHelper.shared()
        // A helper whose capture timed out (a loaded machine, another test's capture) is gone until the next capture
        // clones a new one: a capture of this thread brings it up.
        var pid: Int32 = 0
        for _ in 0..<5 where pid <= 0 {
            _ = helper.capture(threadID: sw_gettid(), maxStackBytes: 4096, timeoutNanos: 500_000_000)
            pid = helper.helperProcessID
        }
        try #require(pid > 0)
        let stat = try #require(readProcFile("/proc/\(pid)/stat"))
        // Field 38 (exit_signal), counted after the parenthesised command name.
        let fields = stat[stat.range(of: ")")!.upperBound...].split(separator: " ")
        #expect(fields[35] == "0", "exit signal \(fields[35]): waitpid(-1) would see the helper")
        #expect(fields[1] == String(getpid()), "parent")
        let descriptors = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")
        #expect(descriptors.count == 1, "the helper keeps only its wake-up pipe: \(descriptors)")
        let status = try #require(readProcFile("/proc/\(pid)/status"))
        let blocked = status.split(separator: "\n").first { $0.hasPrefix("SigBlk:") }
        #expect(blocked?.hasSuffix("fffffffe7ffbfeff") == true, "\(blocked ?? "")")
    }

    @Test(.timeLimit(.minutes(3)))
    func aThreadThatBlocksEverySignalIsCapturedWithItsStackAndKeepsSleeping() throws {
        let helper = try ThreadCaptureHelper.shared()
        let unwinder = try StackUnwinder(processID: getpid())
        let tid = Atomic<Int32>(0)
        let slept = Mutex<(Int32, Double)?>(nil)
        let thread = Thread {
            var all = sigset_t()
            sigfillset(&all)
            pthread_sigmask(SIG_BLOCK, &all, nil)
            tid.store(sw_gettid(), ordering: .releasing)
            let start = DispatchTime.now().uptimeNanoseconds
            var request = timespec(tv_sec: 0, tv_nsec: 800_000_000)
            let failure = nanosleep(&request, nil) < 0 ? errno : 0
            slept.withLock { $0 = (failure, Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6) }
        }
        thread.start()
        #expect(
            pollUntil {
                tid.load(ordering: .acquiring) != 0
                    && readProcFile("/proc/self/task/\(tid.load(ordering: .acquiring))/syscall")?.hasPrefix("230 ")
                        == true
            })
        var framed = 0
        for _ in 0..<20 {
            let capture = try helper.capture(
                threadID: tid.load(ordering: .acquiring), maxStackBytes: 65536, timeout: .milliseconds(250)
            ).get()
            if unwinder.unwind(capture, maxFrames: 64).addresses.count > 2 { framed += 1 }
        }
        #expect(framed == 20)
        #expect(pollUntil { slept.withLock { $0 } != nil })
        let (failure, ms) = try #require(slept.withLock { $0 })
        #expect(failure == 0 && ms >= 790, "nanosleep: errno \(failure) after \(ms) ms")
    }

    /// A real-time spinner pinned to CPU 1, started on demand: while it spins, no ordinary thread pinned there runs
    /// (its run-queue wait grows, its CPU time and timeslices stand still). Needs CAP_SYS_NICE (root).
    final class CPUHog: @unchecked Sendable {  // Everything shared is atomic or a semaphore.
        private let ready = Atomic<Int32>(0)  // 1: real-time and waiting; -errno: refused
        private let spinning = Atomic<Bool>(false)
        private let until = Atomic<UInt64>(0)
        private let go = DispatchSemaphore(value: 0)
        private let done = DispatchSemaphore(value: 0)

        init() throws {
            Thread { [self] in
                var saved = [UInt8](repeating: 0, count: 128)
                _ = sw_pin_to_cpu(1, &saved, 128)
                var parameters = sched_param(sched_priority: 1)
                guard sched_setscheduler(0, SCHED_FIFO, &parameters) == 0 else {
                    ready.store(-errno, ordering: .releasing)
                    done.signal()
                    return
                }
                ready.store(1, ordering: .releasing)
                go.wait()
                spinning.store(true, ordering: .releasing)
                while DispatchTime.now().uptimeNanoseconds < until.load(ordering: .acquiring) {}
                parameters.sched_priority = 0
                sched_setscheduler(0, SCHED_OTHER, &parameters)
                done.signal()
            }.start()
            try #require(sysconf(Int32(_SC_NPROCESSORS_ONLN)) >= 2, "the hog takes CPU 1 and leaves CPU 0")
            #expect(pollUntil { ready.load(ordering: .acquiring) != 0 })
            try #require(
                ready.load(ordering: .acquiring) == 1,
                "SCHED_FIFO refused (errno \(-ready.load(ordering: .acquiring))): needs CAP_SYS_NICE (run as root)")
        }

        /// Spins on CPU 1 from now until `end` (DispatchTime uptime nanoseconds); returns once it spins.
        func spin(until end: UInt64) {
            until.store(end, ordering: .releasing)
            go.signal()
            #expect(pollUntil { spinning.load(ordering: .acquiring) })
        }

        /// Waits for the spin to end.
        func finished() -> Bool { done.wait(timeout: .now() + 10) == .success }
    }

    /// The run-queue wait of the calling thread so far, in nanoseconds (schedstat's second field).
    static func runQueueNanos() -> Double {
        let text = (try? String(contentsOfFile: "/proc/thread-self/schedstat", encoding: .utf8)) ?? ""
        return Double(text.split(separator: " ").dropFirst().first ?? "0") ?? 0
    }

    /// A thread pinned to CPU 1 that runs one call: its id, and the call's outcome once it returned (errno, 0 for
    /// success; wall ms; ms of it waiting for a CPU).
    final class PinnedCall: Sendable {
        private let id = Atomic<Int32>(0)
        /// The thread's own clock (uptime nanoseconds) just before it made the call: its timeouts run from there.
        private let began = Atomic<UInt64>(0)
        let outcome = Mutex<(errno: Int32, ms: Double, runQueueMs: Double)?>(nil)
        var threadID: Int32 { id.load(ordering: .acquiring) }
        var startedAt: UInt64 { began.load(ordering: .acquiring) }
        var result: (errno: Int32, ms: Double, runQueueMs: Double)? { outcome.withLock { $0 } }

        /// Starts the thread; returns once it is in system call `named`.
        init(inCall named: String, _ call: @escaping @Sendable () -> Int32) {
            Thread { [self] in
                var saved = [UInt8](repeating: 0, count: 128)
                _ = sw_pin_to_cpu(1, &saved, 128)
                let queuedBefore = NonInterruptingCaptureTests.runQueueNanos()
                id.store(sw_gettid(), ordering: .releasing)
                let start = DispatchTime.now().uptimeNanoseconds
                began.store(start, ordering: .releasing)
                let failure = call()
                let ms = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6
                let queued = (NonInterruptingCaptureTests.runQueueNanos() - queuedBefore) / 1e6
                outcome.withLock { $0 = (failure, ms, queued) }
            }.start()
            #expect(
                pollUntil {
                    let tid = threadID
                    return tid != 0
                        && ProcDirectory.current.thread(tid).syscall()?.number.map(SyscallTable.name) == named
                })
        }
    }

    static func inProcessSampler() throws -> InProcessStackSampling {
        InProcessStackSampling(
            helper: try ThreadCaptureHelper.shared(), signal: nil, unwinder: try StackUnwinder(processID: getpid()),
            helperUnavailable: nil)
    }

    /// A thread woken when its socket read's timeout ends stays inside the call until it gets a CPU, while `/proc`
    /// already says it runs; a stop then cuts the read short, and the restart would start its whole timeout again.
    /// Held off its CPU by a real-time spinner from inside the read until 200 ms past its timeout, the thread is
    /// sampled every 5 ms: the samples taken while it leaves the read do not stop it and say which call it is in,
    /// and the read lasts its own time.
    ///
    /// The sampling thread itself needs a CPU in those 200 ms: on a loaded machine it may get none, and an attempt
    /// without a sample there proves nothing about leaving (the read's own time is still checked); the case is tried
    /// again, at most three times.
    @Test(.timeLimit(.minutes(3)))
    func aThreadLeavingASocketReadWhoseTimeoutEndedIsNotStoppedAndTheReadLastsItsTime() throws {
        let sampler = try Self.inProcessSampler()
        let timeoutMs = 500
        var tried: [String] = []
        for _ in 0..<3 {
            let hog = try CPUHog()
            let reader = PinnedCall(inCall: "recvfrom") {
                var pair: [Int32] = [-1, -1]
                _ = socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair)
                defer { pair.forEach { close($0) } }
                var timeout = timeval(tv_sec: timeoutMs / 1000, tv_usec: (timeoutMs % 1000) * 1000)
                setsockopt(pair[0], SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
                var byte: UInt8 = 0
                return recv(pair[0], &byte, 1, 0) < 0 ? errno : 0
            }
            // The reader, woken at the timeout, waits for its CPU until the spinner ends. The timeout runs from the
            // reader's own call, which begins after the test's thread started it (and, on a loaded machine, maybe
            // long after): both moments are the reader's own clock plus the call's set-up (a socket pair, an
            // option), allowed 1 ms.
            let start = reader.startedAt
            let (timedOut, spinEnd) = (
                start + UInt64(timeoutMs + 1) * 1_000_000, start + UInt64(timeoutMs + 200) * 1_000_000
            )
            hog.spin(until: spinEnd)
            let thread = SampledThread(threadID: reader.threadID, stackLow: 0, stackHigh: 0)
            var (errors, leaving, sampled, whileLeaving) = ([String](), Set<String>(), 0, 0)
            while reader.result == nil {
                let lookedAt = DispatchTime.now().uptimeNanoseconds
                let sample = sampler.sample(thread, configuration: StallWatchConfiguration())
                // Begun after the timeout and done while the spinner still held the reader's CPU: taken while the
                // reader was leaving the read.
                if lookedAt >= timedOut && DispatchTime.now().uptimeNanoseconds < spinEnd { whileLeaving += 1 }
                if let error = sample.error { errors.append(error) } else { sampled += 1 }
                if let call = sample.leavingCall?.number { leaving.insert(SyscallTable.name(call)) }
                usleep(5000)
            }
            #expect(hog.finished())
            let result = try #require(reader.result)
            #expect(result.errno == EAGAIN, "recv ended with errno \(result.errno) after \(result.ms) ms")
            // A restart after the timeout would last a second timeout, far past 1.1×.
            let ranMs = result.ms - result.runQueueMs
            #expect(
                result.ms >= Double(timeoutMs) * 0.9 && ranMs <= Double(timeoutMs) * 1.1,
                "recv took \(result.ms) ms, \(result.runQueueMs) ms of it waiting for a CPU; errors \(Set(errors))")
            if whileLeaving > 0 {
                #expect(sampled > 0, "no sample with a stack: \(Set(errors))")
                #expect(leaving == ["recvfrom"], "\(whileLeaving) samples while leaving; errors \(Set(errors))")
                return
            }
            tried.append("\(sampled) samples, none between the timeout and the spinner's end")
        }
        Issue.record("the sampling thread never looked while the reader was leaving its read: \(tried)")
    }

    /// A sleeping thread that the capture's interrupt wakes, but that gets no CPU to reach the stop (a real-time
    /// spinner holds its only one), is released when the capture times out; it has not run since the look found it
    /// in its sleep, so its stack is read as it was there: the sample has the sleep's frames, and the sleep lasts
    /// its full time.
    ///
    /// The premise is that the whole capture (its timeout included) falls inside the spin: on a loaded machine the
    /// test's own thread may get its CPU back only after the spin has ended, and a capture begun then proves
    /// nothing. Such an attempt is said and tried again, at most three times; the sleep's own time is checked in
    /// each.
    @Test(.timeLimit(.minutes(3)))
    func aSleeperWokenByTheCaptureButGivenNoCPUIsSampledAsItWasInItsSleep() throws {
        let sampler = try Self.inProcessSampler()
        let sleepMs = 1000
        var configuration = StallWatchConfiguration()
        configuration.captureTimeoutMs = 100
        var tried: [String] = []
        for _ in 0..<3 {
            let hog = try CPUHog()
            let sleeper = PinnedCall(inCall: "clock_nanosleep") {
                var request = timespec(tv_sec: sleepMs / 1000, tv_nsec: (sleepMs % 1000) * 1_000_000)
                return nanosleep(&request, nil) < 0 ? errno : 0
            }
            // Longer than the capture's timeout, shorter than the sleep.
            let spinEnd = DispatchTime.now().uptimeNanoseconds + 400_000_000
            hog.spin(until: spinEnd)
            let askedAt = DispatchTime.now().uptimeNanoseconds
            let sample = sampler.sample(
                SampledThread(threadID: sleeper.threadID, stackLow: 0, stackHigh: 0), configuration: configuration)
            let doneAt = DispatchTime.now().uptimeNanoseconds
            #expect(hog.finished())
            #expect(pollUntil { sleeper.result != nil })
            let result = try #require(sleeper.result)
            #expect(
                result.errno == 0 && result.ms >= Double(sleepMs) * 0.99 && result.ms - result.runQueueMs <= 1100,
                "nanosleep: errno \(result.errno) after \(result.ms) ms, \(result.runQueueMs) of it waiting for a CPU")
            guard doneAt < spinEnd else {
                tried.append(
                    "capture asked \(Int64(askedAt) - Int64(spinEnd) + 400_000_000) ns into the 400 ms spin, done "
                        + "\((doneAt - askedAt) / 1_000_000) ms later, after the spin: \(String(describing: sample.unstopped))"
                )
                continue
            }
            #expect(sample.unstopped == .timedOut, "\(String(describing: sample.unstopped)) \(sample.error ?? "")")
            #expect(sample.error == nil, "\(sample.error ?? "")")
            let symbols = Symbolicator(processID: getpid(), mode: .full, cache: SymbolCache()).symbolicate(
                sample.frames
            )
            .compactMap { $0.symbol?.lowercased() }
            #expect(symbols.contains { $0.contains("nanosleep") } && symbols.count > 3, "\(symbols)")
            #expect(sample.failure?.contains("had not been on a CPU") == true, "\(sample.failure ?? "")")
            return
        }
        Issue.record("no capture fell inside the spin: \(tried)")
    }

    /// The race the choice of capture cannot close: a thread may enter a call that any stop cuts short (a socket
    /// read with SO_RCVTIMEO) between the look at its state and the stop. Captured through the helper again and
    /// again while it does nothing but such reads, it never sees EINTR: each call the stop cut short runs again.
    @Test(.timeLimit(.minutes(3)))
    func aCallTheStopCutShortRunsAgainInsteadOfFailingWithEINTR() throws {
        let helper = try ThreadCaptureHelper.shared()
        let tid = Atomic<Int32>(0)
        let stop = Atomic<Bool>(false)
        let counts = Mutex<(calls: Int, eintr: Int, other: Int)>((0, 0, 0))
        let finished = DispatchSemaphore(value: 0)
        let thread = Thread {
            var pair: [Int32] = [-1, -1]
            _ = socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair)
            defer { pair.forEach { close($0) } }
            var timeout = timeval(tv_sec: 0, tv_usec: 20_000)
            setsockopt(pair[0], SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            tid.store(sw_gettid(), ordering: .releasing)
            var byte: UInt8 = 0
            while !stop.load(ordering: .acquiring) {
                let failure = recv(pair[0], &byte, 1, 0) < 0 ? errno : 0
                counts.withLock {
                    $0.calls += 1
                    if failure == EINTR { $0.eintr += 1 } else if failure != EAGAIN { $0.other += 1 }
                }
            }
            finished.signal()
        }
        thread.start()
        #expect(pollUntil { tid.load(ordering: .acquiring) != 0 })
        // Captures until 50 of them restarted a read (the restart path really ran 50 times): on a quiet machine about
        // the first 60 captures, since the thread does nothing else; on a loaded one, where it waits for a CPU outside
        // its read more often, more. At most 400.
        var (restarted, captures) = (0, 0)
        while restarted < 50 && captures < 400 {
            let capture = try helper.capture(
                threadID: tid.load(ordering: .acquiring), maxStackBytes: 16384, timeout: .milliseconds(500)
            ).get()
            captures += 1
            if capture.restartedCall { restarted += 1 }
            usleep(2000)
        }
        stop.store(true, ordering: .releasing)
        #expect(finished.wait(timeout: .now() + 10) == .success)
        let seen = counts.withLock { $0 }
        #expect(seen.eintr == 0 && seen.other == 0, "\(seen) after \(captures) captures")
        #expect(restarted >= 50, "\(restarted) of \(captures) captures restarted a call")
    }
}
