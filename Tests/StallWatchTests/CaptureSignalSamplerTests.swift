// Tests of in-process capture (SignalSampler) and of unwinding its copies (StackUnwinder).
import CStallWatchFixtures
import CStallWatchSignal
import Dispatch
import StallWatchTestSupport
import Testing

@testable import StallWatch

#if canImport(Glibc)
    import Glibc
#endif

extension CaptureTests {
    @Suite(.offPool) struct SignalSamplerTests {
        @Test func unwoundCallersMatchTheThreadsOwnBacktrace() throws {
            let sampler = try SignalSampler.shared()
            let target = SpinningChain(depth: 24)
            defer { target.stop() }
            let capture = try sampler.capture(target.sampled, timeout: .seconds(2)).get()
            #expect(capture.threadID == target.sampled.threadID)
            #expect(capture.registers.count == 17)
            #expect(!capture.stack.isEmpty)
            #expect(capture.notes.isEmpty)
            #expect(capture.handlerNanoseconds <= capture.pauseNanoseconds)

            let unwinder = try StackUnwinder(processID: getpid())
            let stack = unwinder.unwind(capture, maxFrames: 256)
            let truth = target.truth
            // [0] the spin loop, [1] inside the bottom function (like truth[0]), then the same callers.
            try #require(truth.count > target.depth)
            #expect(stack.error == nil, "\(stack.error ?? "")")
            #expect(stack.addresses.count >= target.depth + 2)
            #expect(Array(stack.addresses.dropFirst(2)) == Array(truth.dropFirst(1)))
            // [1] and truth[0] are different call sites in one function.
            #expect(stack.addresses.count > 1 && stack.addresses[1] != truth[0])
            #expect(stack.addresses.count > 1 && stack.addresses[1].distance(to: truth[0]).magnitude < 512)
        }

        @Test func aWarmUnwinderReusesItsCaches() throws {
            let sampler = try SignalSampler.shared()
            let target = SpinningChain(depth: 40)
            defer { target.stop() }
            let unwinder = try StackUnwinder(processID: getpid())
            var times: [UInt64] = []
            var first: [UInt64]?
            for _ in 0..<50 {
                let capture = try sampler.capture(target.sampled, timeout: .seconds(2)).get()
                let stack = unwinder.unwind(capture, maxFrames: 128)
                #expect(stack.error == nil)
                if let first {
                    #expect(Array(stack.addresses.dropFirst()) == Array(first.dropFirst()))
                } else {
                    first = stack.addresses
                }
                times.append(stack.unwindNanoseconds)
            }
            // No timing bar here (scripts/bench.sh measures); only that warm unwinds are not slower than the first.
            #expect(times.sorted()[times.count / 2] <= times[0])
        }

        @Test func aThreadBlockingTheSignalTimesOutWithItsStateAndTheSlotIsReused() throws {
            let sampler = try SignalSampler.shared()
            let ready = DispatchSemaphore(value: 0), unblock = DispatchSemaphore(value: 0)
            let unblocked = DispatchSemaphore(value: 0), finish = DispatchSemaphore(value: 0)
            nonisolated(unsafe) var sampled = SampledThread(threadID: 0, stackLow: 0, stackHigh: 0)
            let signal = sampler.signal
            let thread = CaptureTestThread {
                var set = sigset_t()
                sigemptyset(&set)
                sigaddset(&set, signal)
                pthread_sigmask(SIG_BLOCK, &set, nil)
                sampled = SampledThread.current()  // not registerCurrentThread(): it would unblock the signal
                ready.signal()
                unblock.wait()
                pthread_sigmask(SIG_UNBLOCK, &set, nil)  // the stale signal arrives now and finds no request
                unblocked.signal()
                finish.wait()
            }
            defer {
                unblock.signal()
                finish.signal()
                thread.join()
            }
            ready.wait()
            let blockedState = pollUntil {
                ProcDirectory(processID: getpid(), threadID: sampled.threadID).stat()?.state == "S"
            }
            try #require(blockedState)

            let result = sampler.capture(sampled, timeout: .milliseconds(100))
            guard case .failure(let error) = result else {
                Issue.record("capture of a thread blocking the signal succeeded")
                return
            }
            #expect(error.code == .captureTimedOut)
            #expect(error.message.contains("did not run within 100 ms"))
            #expect(error.message.contains("thread state S (sleeping)"))
            #expect(error.context["threadState"] == "S")
            #expect(sw_capture_slots_in_use() == 0)

            unblock.signal()
            unblocked.wait()
            let again = try sampler.capture(sampled, timeout: .seconds(2)).get()
            #expect(again.threadID == sampled.threadID)
            #expect(!again.stack.isEmpty)
            #expect(sw_capture_slots_in_use() == 0)
        }

        @Test func aLoaderLockHolderDoesNotDelayTheCapture() throws {
            let sampler = try SignalSampler.shared()
            let target = SpinningChain(depth: 16)
            defer { target.stop() }
            nonisolated(unsafe) let gate = try #require(sw_test_gate_create())
            defer { sw_test_gate_destroy(gate) }
            // Expectations wait until the gate is open: recording a failure takes a backtrace, and glibc's
            // backtrace() is libunwind's in this process (LIMITS.md), which would wait for the loader lock held here.
            let (captures, stack) = try { () throws -> ([StackCapture], UnwoundStack) in
                let holder = CaptureTestThread { sw_test_gate_hold_loader_lock(gate) }
                sw_test_gate_wait_entered(gate)
                defer {
                    sw_test_gate_open(gate)
                    holder.join()
                }
                var captures: [StackCapture] = []
                for _ in 0..<20 {
                    captures.append(try sampler.capture(target.sampled, timeout: .seconds(2)).get())
                }
                // Unwinding off-thread does not need the loader lock either (libunwind-ptrace reads /proc and files).
                let capture = try sampler.capture(target.sampled, timeout: .seconds(2)).get()
                return (captures, try StackUnwinder(processID: getpid()).unwind(capture, maxFrames: 128))
            }()
            // Every capture completed while the lock was held (a handler that touched it would have timed out).
            // The handler's own work is what the lock could block, and it stays in microseconds (a few µs
            // measured; the bar leaves room for a preemption inside the handler). The pause around it is signal
            // delivery and the target's wait for a CPU: the scheduler's, not the handler's, so on a shared 2-core
            // machine only a bar that tells a blocked handler (seconds) from a late CPU (ms) is reliable.
            let work = percentile(captures.map(\.handlerNanoseconds).sorted(), 0.5)
            #expect(work < 200_000, "median handler work \(work) ns with the loader lock held")
            let median = percentile(captures.map(\.pauseNanoseconds).sorted(), 0.5)
            print("loader lock held: median handler work \(work) ns, median pause \(median) ns")
            #expect(median < 100_000_000, "median pause \(median) ns with the loader lock held")
            #expect(Array(stack.addresses.dropFirst(2)) == Array(target.truth.dropFirst(1)))
        }

        @Test func concurrentRequestersOnSeveralThreadsAllComplete() throws {
            let sampler = try SignalSampler.shared()
            let targets = (0..<3).map { _ in SpinningChain(depth: 8) }
            defer { targets.forEach { $0.stop() } }
            let rounds = 150
            // One requester per target, plus a second one on target 0.
            let assignments = [0, 1, 2, 0]
            nonisolated(unsafe) let failures = UnsafeMutablePointer<Int>.allocate(capacity: assignments.count)
            failures.initialize(repeating: 0, count: assignments.count)
            defer { failures.deallocate() }
            let requesters = assignments.enumerated().map { index, targetIndex in
                let target = targets[targetIndex]
                return CaptureTestThread {
                    for _ in 0..<rounds {
                        switch sampler.capture(target.sampled, timeout: .seconds(5)) {
                        case .success(let capture)
                        where capture.threadID == target.sampled.threadID
                            && !capture.stack.isEmpty:
                            break
                        default:
                            failures[index] += 1
                        }
                    }
                }
            }
            requesters.forEach { $0.join() }
            #expect(Array(UnsafeBufferPointer(start: failures, count: assignments.count)) == [0, 0, 0, 0])
            #expect(sw_capture_slots_in_use() == 0)

            let unwinder = try StackUnwinder(processID: getpid())
            for target in targets {
                let stack = unwinder.unwind(
                    try sampler.capture(target.sampled, timeout: .seconds(2)).get(), maxFrames: 64)
                #expect(Array(stack.addresses.dropFirst(2)) == Array(target.truth.dropFirst(1)))
            }
        }

        @Test func aThreadCanCaptureItself() throws {
            let sampler = try SignalSampler.shared()
            var saved = sigset_t()
            pthread_sigmask(SIG_SETMASK, nil, &saved)
            defer { pthread_sigmask(SIG_SETMASK, &saved, nil) }  // this is a shared Dispatch worker thread
            let capture = try sampler.capture(sampler.registerCurrentThread(), timeout: .seconds(1)).get()
            #expect(!capture.stack.isEmpty)
            let stack = try StackUnwinder(processID: getpid()).unwind(capture, maxFrames: 64)
            #expect(stack.addresses.count > 3)
        }

        @Test func wrongStackBoundsYieldRegistersAndANoteButNoStack() throws {
            let target = SpinningChain(depth: 4)
            defer { target.stop() }
            var bogus = target.sampled
            bogus.stackLow = 0x1000
            bogus.stackHigh = 0x2000
            let capture = try SignalSampler.shared().capture(bogus, timeout: .seconds(2)).get()
            #expect(capture.stack.isEmpty)
            #expect(capture.registers.count == 17 && capture.instructionPointer != 0)
            #expect(capture.notes.contains { $0.contains("outside the thread's stack") })
            let stack = try StackUnwinder(processID: getpid()).unwind(capture, maxFrames: 64)
            #expect(stack.addresses.first == capture.instructionPointer)
        }

        @Test func aGoneThreadIsReportedAsSuch() throws {
            nonisolated(unsafe) var sampled = SampledThread(threadID: 0, stackLow: 0, stackHigh: 0)
            let thread = CaptureTestThread { sampled = SampledThread.current() }
            thread.join()
            let result = try SignalSampler.shared().capture(sampled, timeout: .milliseconds(100))
            guard case .failure(let error) = result else {
                Issue.record("captured an exited thread")
                return
            }
            #expect(error.code == .noSuchProcess)
            #expect(sw_capture_slots_in_use() == 0)
        }

        @Test func signalNamesParse() {
            let low = __libc_current_sigrtmin(), high = __libc_current_sigrtmax()
            #expect(SignalSampler.parseSignal("SIGRTMIN+3") == low + 3)
            #expect(SignalSampler.parseSignal("rtmax-1") == high - 1)
            #expect(SignalSampler.parseSignal("SIGRTMIN") == low)
            #expect(SignalSampler.parseSignal(String(low + 2)) == low + 2)
            #expect(SignalSampler.parseSignal("SIGSEGV") == nil)
            #expect(SignalSampler.parseSignal("11") == nil)
            #expect(SignalSampler.parseSignal("SIGRTMAX+1") == nil)
        }

        @Test func aSignalWithSomeoneElsesHandlerIsRefused() async {
            await #expect(processExitsWith: .success) {
                let signal = __libc_current_sigrtmin() + 2
                var action = sigaction()
                action.__sigaction_handler.sa_handler = { _ in }
                sigaction(signal, &action, nil)
                setenv("STALLWATCH_SAMPLE_SIGNAL", "SIGRTMIN+2", 1)
                do {
                    _ = try SignalSampler.shared()
                    exit(1)
                } catch let error as StallWatchError {
                    exit(error.code == .signalUnavailable && error.message.contains("will not replace it") ? 0 : 2)
                } catch {
                    exit(3)
                }
            }
        }
    }
}
