import StallWatchTestSupport
// What each captured address is decides how it is looked up and what the report's frame says.
import Testing

@testable import StallWatch

#if canImport(Glibc)
    import Glibc
#endif

@Suite(.offPool) struct UnwoundFrameTests {
    @Test func onlyReturnAddressesAreLookedUpInsideTheirCall() {
        #expect(UnwoundFrame.programCounter(0x1000).lookupAddress == 0x1000)
        #expect(UnwoundFrame.returnAddress(0x1000).lookupAddress == 0x0fff)
        #expect(UnwoundFrame.asyncResumePoint(0x1000).lookupAddress == 0x1000)
        #expect(UnwoundFrame.stackSwitch(0x1000).lookupAddress == 0x0fff)
        #expect(UnwoundFrame.returnAddress(0).lookupAddress == 0)
    }

    @Test func resumePointsAndStackSwitchesKeepTheirReportKind() {
        #expect(UnwoundFrame.asyncResumePoint(1).reportKind == .async)
        #expect(UnwoundFrame.stackSwitch(1).reportKind == .stackSwitch)
        #expect(UnwoundFrame.programCounter(1).reportKind == nil && UnwoundFrame.returnAddress(1).reportKind == nil)
    }

    @Test func aPlainBacktraceIsTheProgramCounterThenReturnAddresses() {
        #expect(UnwoundFrame.backtrace([3, 2, 1]) == [.programCounter(3), .returnAddress(2), .returnAddress(1)])
        #expect(UnwoundFrame.backtrace([]).isEmpty)
    }

    @Test func aStoredFrameIsReadBackAsTheFrameItWasWrittenFrom() {
        var resume = StackFrame(address: 0x50)
        resume.kind = .async
        var switched = StackFrame(address: 0x60)
        switched.kind = .stackSwitch
        let plain = StackFrame(address: 0x70)
        #expect(UnwoundFrame(plain, innermost: true) == .programCounter(0x70))
        #expect(UnwoundFrame(plain, innermost: false) == .returnAddress(0x70))
        #expect(UnwoundFrame(resume, innermost: false) == .asyncResumePoint(0x50))
        #expect(UnwoundFrame(switched, innermost: false) == .stackSwitch(0x60))
    }

    /// The symbolicator gives each frame the kind its captured frame says, whatever its position.
    @Test func theSymbolicatorMarksFramesByKindNotByPosition() {
        let frames = Symbolicator(processID: getpid(), mode: .off).symbolicate([
            .programCounter(0x10), .asyncResumePoint(0x20), .returnAddress(0x30), .stackSwitch(0x40),
        ])
        #expect(frames.map(\.kind) == [nil, .async, nil, .stackSwitch])
        #expect(frames.map(\.address) == [0x10, 0x20, 0x30, 0x40])
    }
}
