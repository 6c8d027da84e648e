// Slow stress test of in-process capture: many samples of a thread that churns malloc and dlopen/dlclose.
import CStallWatchSignal
import Dispatch
import Synchronization
import Testing

@testable import StallWatch

#if canImport(Glibc)
    import Glibc
#endif

extension CaptureTests {
    /// Slow: 10,000 captures, every fourth unwound, while the target takes and releases malloc's and the
    /// loader's locks and maps and unmaps a library. About 3 s on an idle 2-core machine; 30–40 s at load
    /// average 10, where the target often waits milliseconds for a CPU before it can take the signal.
    @Suite struct StressTests {
        /// A library from Debian 12's base system that this process has not loaded, so dlclose really unmaps it.
        static let unloadedLibrary: String? = ["libz.so.1", "libbz2.so.1.0", "libexpat.so.1", "libpcre2-8.so.0"]
            .first { name in
                if let handle = dlopen(name, RTLD_NOW | RTLD_NOLOAD) {  // already loaded: not a real unload
                    dlclose(handle)
                    return false
                }
                return true
            }

        final class Churn: Sendable {
            let stop = Atomic<Bool>(false)
            let loads = Atomic<Int>(0)
        }

        @Test func tenThousandCapturesOfAThreadChurningMallocAndDlopenAllComplete() throws {
            let library = try #require(
                Self.unloadedLibrary,
                "none of libz, libbz2, libexpat, libpcre2-8 is installed and not yet loaded by the test process")
            let sampler = try SignalSampler.shared()
            let churn = Churn()
            let ready = DispatchSemaphore(value: 0)
            nonisolated(unsafe) var sampled = SampledThread(threadID: 0, stackLow: 0, stackHigh: 0)
            let target = CaptureTestThread {
                sampled = sampler.registerCurrentThread()
                ready.signal()
                var round = 0
                while !churn.stop.load(ordering: .relaxed) {
                    let block = malloc(16 + (round % 8192))
                    if let block { memset(block, 0xA5, 16) }
                    free(block)
                    if round % 4 == 0, let handle = dlopen(library, RTLD_NOW | RTLD_LOCAL) {
                        dlclose(handle)
                        churn.loads.add(1, ordering: .relaxed)
                    }
                    round += 1
                }
            }
            defer {
                churn.stop.store(true, ordering: .relaxed)
                target.join()
            }
            ready.wait()

            let unwinder = try StackUnwinder(processID: getpid())
            var failures: [String] = []
            var emptyUnwinds = 0, unwindErrors = 0
            var stopReasons: [String: Int] = [:]
            var pauses: [UInt64] = []
            pauses.reserveCapacity(10_000)
            let started = ContinuousClock.now
            for index in 0..<10_000 {
                switch sampler.capture(sampled, timeout: .seconds(2)) {
                case .success(let capture):
                    pauses.append(capture.pauseNanoseconds)
                    if capture.stack.isEmpty { failures.append("capture \(index): empty stack \(capture.notes)") }
                    if index % 4 == 0 {  // unwinding every copy would double the run time for little more coverage
                        let stack = unwinder.unwind(capture, maxFrames: 128)
                        if stack.addresses.isEmpty { emptyUnwinds += 1 }
                        if let error = stack.error {
                            unwindErrors += 1
                            let reason = error.replacing(/after \d+ frames/, with: "after N frames")
                            stopReasons[reason, default: 0] += 1
                        }
                    }
                case .failure(let error):
                    failures.append("capture \(index): \(error)")
                }
                if index % 1000 == 999 { unwinder.flushCaches() }  // the library comes and goes
            }
            #expect(failures.isEmpty, "\(failures.count) failures, first: \(failures.prefix(3))")
            #expect(emptyUnwinds == 0)
            #expect(churn.loads.load(ordering: .relaxed) > 0)
            #expect(sw_capture_slots_in_use() == 0)
            pauses.sort()
            // Context for whoever reads the log; bars live in scripts/bench.sh, not in tests.
            print(
                "stress: \(pauses.count) captures in \(ContinuousClock.now - started), pause median "
                    + "\(percentile(pauses, 0.5) / 1000) us, p99 "
                    + "\(percentile(pauses, 0.99) / 1000) us; \(churn.loads.load(ordering: .relaxed)) dlopen/dlclose; "
                    + "\(unwindErrors) of 2,500 unwinds stopped early: "
                    + "\(stopReasons.sorted { $0.value > $1.value }.prefix(3))")
        }
    }
}
