// A process that forks without exec: the child captures through a helper of its own, the parent's keeps serving.
import CStallWatchCore
import CStallWatchFixtures
import CStallWatchPtrace
import Dispatch
import Foundation
import Synchronization
import Testing

@testable import StallWatch

@Suite(.serialized) struct ForkedChildCaptureTests {
    /// Captures a parked thread of this process through the helper, over and over, until stopped.
    final class ParentCaptures: @unchecked Sendable {  // `thread`, `parked`: set once in init.
        let succeeded = Atomic<Int>(0)
        let failures = Mutex<[String]>([])
        private let running = Atomic<Bool>(true)
        private let release = DispatchSemaphore(value: 0)
        private let finished = DispatchSemaphore(value: 0)
        private let parkedID = Atomic<Int32>(0)

        init(helper: ThreadCaptureHelper) throws {
            Thread { [self] in
                parkedID.store(sw_gettid(), ordering: .releasing)
                release.wait()
            }.start()
            try #require(pollUntil { parkedID.load(ordering: .acquiring) != 0 })
            let tid = parkedID.load(ordering: .acquiring)
            Thread { [self] in
                while running.load(ordering: .acquiring) {
                    switch helper.capture(threadID: tid, maxStackBytes: 16384, timeout: .seconds(2)) {
                    case .success: succeeded.add(1, ordering: .relaxed)
                    case .failure(let error): failures.withLock { $0.append(error.message) }
                    }
                }
                finished.signal()
            }.start()
        }

        func stop() {
            running.store(false, ordering: .releasing)
            finished.wait()
            release.signal()
        }
    }

    @Test(.timeLimit(.minutes(2)))
    func aChildForkedWithoutExecCapturesWithItsOwnHelperWhileTheParentKeepsCapturing() throws {
        let helper = try ThreadCaptureHelper.shared()
        let parentHelper = helper.helperProcessID
        try #require(parentHelper > 0)
        let unwinder = try StackUnwinder(processID: getpid())
        let symbolicator = Symbolicator(processID: getpid(), mode: .fast)
        let captures = try ParentCaptures(helper: helper)
        // Forks land while the parent's capture thread is mid-request (holding the helper's lock) or between two.
        #expect(pollUntil { captures.succeeded.load(ordering: .relaxed) >= 5 })
        let capacity = 65536
        var stack = [UInt8](repeating: 0, count: capacity)
        for round in 0..<3 {
            var result = sw_test_fork_result()
            let status = sw_test_fork_and_capture(&result, &stack, capacity, 30_000)
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
        let before = captures.succeeded.load(ordering: .relaxed)
        #expect(pollUntil { captures.succeeded.load(ordering: .relaxed) >= before + 5 })
        captures.stop()
        #expect(captures.failures.withLock { $0 }.isEmpty, "\(captures.failures.withLock { $0 })")
        #expect(helper.helperProcessID == parentHelper, "the parent's helper was replaced")
        // The parent's helper still holds its one descriptor: no child took a copy of its pipe with it.
        let descriptors = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(parentHelper)/fd")
        #expect(descriptors.count == 1, "\(descriptors)")
    }
}
