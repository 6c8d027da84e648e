// The capture ledger between looks at a thread's /proc files and captures that stop it.
import Dispatch
import Foundation
import Testing

@testable import StallWatch

#if canImport(Glibc)
    import Glibc
#endif

@Suite struct CaptureLedgerTests {
    /// A capture that waited its bound for a look and went ahead under it is told to the look at its end; a look
    /// with no capture under it is not.
    @Test func aLookIsToldWhenACaptureBeganUnderIt() throws {
        let (pid, tid) = (getpid(), Int32.max - 7)
        let quiet = try #require(CaptureLedger.beginLook(processID: pid, threadID: tid))
        #expect(!CaptureLedger.endLook(processID: pid, threadID: tid, begun: quiet))
        let look = try #require(CaptureLedger.beginLook(processID: pid, threadID: tid))
        let captured = DispatchSemaphore(value: 0)
        Thread {
            CaptureLedger.capturing(processID: pid, threadID: tid) {}
            captured.signal()
        }.start()
        #expect(captured.wait(timeout: .now() + 10) == .success)
        #expect(CaptureLedger.endLook(processID: pid, threadID: tid, begun: look))
        #expect(CaptureLedger.finishedCaptures(processID: pid, threadID: tid) == 1)
    }
}
