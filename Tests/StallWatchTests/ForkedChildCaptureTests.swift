// A process that forks without exec: the child captures through a helper of its own, the parent's keeps serving.
import CStallWatchCore
import CStallWatchFixtures
import CStallWatchPtrace
import Dispatch
import Foundation
import StallWatchTestSupport
import Synchronization
import Testing

@testable import StallWatch

@Suite(.offPool, .serialized) struct ForkedChildCaptureTests {
    /// Captures a parked thread of this process through the helper in bursts of `burst`, one per ``go()``.
    final class ParentCaptures: @unchecked Sendable {  // All lets; the counters are atomic or locked.
        static let burst = 20
        let succeeded = Atomic<Int>(0)
        let failures = Mutex<[String]>([])
        private let running = Atomic<Bool>(true)
        private let release = DispatchSemaphore(value: 0)
        private let request = DispatchSemaphore(value: 0)
        private let burstDone = DispatchSemaphore(value: 0)
        private let parkedID = Atomic<Int32>(0)

        init(helper: ThreadCaptureHelper) throws {
            Thread { [self] in
                parkedID.store(sw_gettid(), ordering: .releasing)
                release.wait()
            }.start()
            try #require(pollUntil { parkedID.load(ordering: .acquiring) != 0 })
            let tid = parkedID.load(ordering: .acquiring)
            Thread { [self] in
                while true {
                    request.wait()
                    guard running.load(ordering: .acquiring) else { break }
                    for _ in 0..<Self.burst {
                        switch helper.capture(threadID: tid, maxStackBytes: 16384, timeout: .seconds(2)) {
                        case .success: succeeded.add(1, ordering: .relaxed)
                        case .failure(let error): failures.withLock { $0.append(error.message) }
                        }
                    }
                    burstDone.signal()
                }
            }.start()
        }

        /// Starts a burst of captures on the capturing thread.
        func go() { request.signal() }

        /// Waits for the burst started by the last ``go()``.
        func waitForBurst() -> Bool { burstDone.wait(timeout: .now() + 60) == .success }

        func stop() {
            running.store(false, ordering: .releasing)
            request.signal()
            release.signal()
        }
    }

    @Test(.timeLimit(.minutes(5)))
    func aChildForkedWithoutExecCapturesWithItsOwnHelperWhileTheParentKeepsCapturing() throws {
        let helper = try ThreadCaptureHelper.shared()
        let parentHelper = helper.helperProcessID
        try #require(parentHelper > 0)
        let unwinder = try StackUnwinder(processID: getpid())
        let symbolicator = Symbolicator(processID: getpid(), mode: .fast)
        let captures = try ParentCaptures(helper: helper)
        defer { captures.stop() }
        let capacity = 65536
        var stack = [UInt8](repeating: 0, count: capacity)
        for round in 0..<3 {
            var result = sw_test_fork_result()
            // The fork lands while the parent's capturing thread is in a burst of requests (holding the
            // helper's lock, or between two), and the parent's captures go on while the child runs.
            captures.go()
            let status = sw_test_fork_and_capture(&result, &stack, capacity, 30_000)
            #expect(captures.waitForBurst(), "round \(round): the parent's captures did not finish")
            #expect(status == 0, "round \(round): step \(result.failed_step), errno \(result.failed_errno)")
            // The child's capture went through a helper the child cloned, not through the parent's.
            #expect(result.helper > 0 && result.helper != parentHelper, "round \(round): helper \(result.helper)")
            #expect(result.helper_parent == result.child, "round \(round): helper's parent \(result.helper_parent)")
            // The parked poll() was stopped, not interrupted: it returned the release byte, no EINTR.
            #expect(result.poll_result == 1 && result.poll_errno == 0, "round \(round): poll \(result.poll_result)")
            let record = result.record
            let registers = withUnsafeBytes(of: record.registers) { Array($0.bindMemory(to: UInt64.self)) }
            let capture = StackCapture(
                threadID: result.parked_thread, registers: registers, stackPointer: record.stack_pointer,
                stack: Array(stack[..<Int(record.stack_size)]), pauseNanoseconds: record.pause_ns,
                handlerNanoseconds: 0, stackLow: record.stack_low, stackHigh: record.stack_high)
            // Same executable, same mappings: the child's copy unwinds against this process's text.
            let frames = symbolicator.symbolicate(unwinder.unwind(capture, maxFrames: 64).addresses)
            let symbols = frames.compactMap(\.symbol)
            #expect(symbols.contains("sw_test_fork_parked"), "round \(round): \(symbols)")
            #expect(symbols.contains { $0.contains("poll") }, "round \(round): \(symbols)")
        }
        #expect(captures.succeeded.load(ordering: .relaxed) == 3 * ParentCaptures.burst)
        #expect(captures.failures.withLock { $0 }.isEmpty, "\(captures.failures.withLock { $0 })")
        #expect(helper.helperProcessID == parentHelper, "the parent's helper was replaced")
        // The parent's helper still holds its one descriptor: no child took a copy of its pipe with it.
        let descriptors = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(parentHelper)/fd")
        #expect(descriptors.count == 1, "\(descriptors)")
    }
}
