// Every tool names the same top frame for the same stall: event lines, log records, `reports list`, summaries.
import Foundation
import StallWatchTestSupport
import Testing

@testable import StallWatch
@testable import StallWatchInspector

@Suite(.offPool) struct ApplicationFrameTests {
    /// A lock stall: libc's lock wait innermost, the application's caller next.
    static var lockStall: StallReport {
        var report = ReportFixtures.ongoingStall
        report.status = .ended
        report.samples[0].frames = [
            StackFrame(
                address: 0x7f3a1229a129, image: ReportFixtures.libc, offset: 0x9a129, symbol: "__lll_lock_wait",
                symbolOffset: 41),
            StackFrame(
                address: 0x7f3a11e12345, image: ReportFixtures.dispatch, offset: 0x12345,
                symbol: "_dispatch_client_callout", symbolOffset: 8),
            StackFrame(
                address: 0x55d0a0005000, image: ReportFixtures.demo, offset: 0x5000,
                symbol: "ChatDemo.Store.save() throws -> ()", symbolOffset: 40),
        ]
        return report
    }

    @Test func theFirstFrameOutsideSystemAndRuntimeLibrariesIsTheTopFrame() throws {
        let frame = try #require(Self.lockStall.applicationFrame)
        #expect(frame == ApplicationFrame(name: "ChatDemo.Store.save() throws -> ()", offset: "40"))
        #expect(frame.description == "ChatDemo.Store.save() throws -> () + 40")
        #expect(frame.function == "ChatDemo.Store.save() throws -> ()")
    }

    @Test func eventLinesLogRecordsAndListsNameTheSameFunction() throws {
        let report = Self.lockStall
        let line = try #require(JSONLinesEventWriter.line(for: .ended(report)))
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        let logged = try #require(StallEventLogger.record(for: .ended(report)))
        let listed = try #require(ReportSummary(path: "x.json", report: report).topFrame)
        let function = "ChatDemo.Store.save() throws -> ()"
        #expect(object["top"] as? String == function)
        #expect(logged.metadata["top_frame"] == function)
        #expect(listed.hasPrefix(function))
        var grouper = StallGrouper(by: .frame)
        grouper.add(report, path: "x.json")
        #expect(grouper.groups().map(\.key) == [function])
    }

    @Test func withoutSymbolsTheFrameIsImageAndOffsetAndWithoutFramesThereIsNone() {
        let bare = [StackFrame(address: 0x7f3a122a1000, image: ReportFixtures.libc, offset: 0xa1000)]
        #expect(ApplicationFrame(frames: bare)?.function == "libc.so.6 + 0xa1000")
        #expect(ApplicationFrame(frames: [StackFrame(address: 0x1000)])?.description == "0x1000")
        #expect(ApplicationFrame(frames: []) == nil)
    }
}
