// After offline symbolication every view shows the new names, and the HTML page states the cause fully.
import Foundation
import StallWatchTestSupport
import Testing

@testable import StallWatch
@testable import StallWatchInspector

/// A function of this test binary for offline symbolication to find (through its C-callable thunk).
func viewsAgreeMarker() { precondition(ProcessInfo.processInfo.processIdentifier > 0) }

@Suite(.offPool) struct ViewsAgreeTests {
    /// The ended fixture whose innermost frame is `viewsAgreeMarker`'s thunk in this binary, unsymbolicated,
    /// in the samples, the point stack and the call tree.
    static func unsymbolicated() throws -> StallReport {
        let marker: @convention(c) () -> Void = viewsAgreeMarker
        let address = UInt64(UInt(bitPattern: unsafeBitCast(marker, to: UnsafeRawPointer.self)))
        let image = try #require(try ImageMap(processID: getpid()).image(containing: address))
        let buildID = try #require(BuildID.ofFile(atPath: image.path))
        var report = ReportFixtures.endedStall
        let frame = StackFrame(address: address, image: image.path, offset: address - image.base)
        report.samples[0].frames = [frame] + report.samples[0].frames.dropFirst(2)
        report.samples[1].frames = [frame]
        report.images.append(ImageInfo(path: image.path, buildId: buildID, base: image.base, size: nil))
        report.pointStack = StallReport.PointStack(frames: report.samples[0].frames, count: 2)
        report.callTree = CallTree(samples: report.samples).roots
        return report
    }

    @Test func symbolicatedNamesReachListSummaryAndHTML() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("sw-views-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let input = directory.appendingPathComponent("in.json").path
        try Self.unsymbolicated().encodedJSON().write(to: URL(fileURLWithPath: input))
        let before = CapturedConsole.run(["reports", "list", input]).1.standardOutput
        #expect(!before.contains("viewsAgreeMarker"))

        let output = directory.appendingPathComponent("stall-symbolicated.json").path
        let (code, console) = CapturedConsole.run(["reports", "symbolicate", input, "-o", output])
        #expect(code == .ok, "\(console.standardError)")
        try FileManager.default.removeItem(atPath: input)
        let list = CapturedConsole.run(["reports", "list", output]).1.standardOutput
        #expect(list.contains("viewsAgreeMarker"), "\(list)")
        let summary = CapturedConsole.run(["reports", "summary", output, "--by", "frame"]).1.standardOutput
        #expect(summary.contains("viewsAgreeMarker"), "\(summary)")
        let html = directory.appendingPathComponent("r.html").path
        #expect(CapturedConsole.run(["reports", "html", output, "-o", html]).0 == .ok)
        let page = try String(contentsOfFile: html, encoding: .utf8)
        #expect(page.contains("viewsAgreeMarker"))
        // The detail view and the text exports read the same frames.
        let show = CapturedConsole.run(["reports", "show", output]).1.standardOutput
        #expect(show.contains("viewsAgreeMarker"), "\(show)")
        for format in ["folded", "speedscope"] {
            let (exportCode, export) = CapturedConsole.run(["reports", "export", output, "--format", format])
            #expect(exportCode == .ok, "\(export.standardError)")
            #expect(export.standardOutput.contains("viewsAgreeMarker"), "\(format): \(export.standardOutput)")
        }
        let json = CapturedConsole.run(["reports", "show", output, "--json"]).1.standardOutput
        #expect(json.contains("viewsAgreeMarker"))
        let report = try ReportStore.load(path: output)
        #expect(report.pointStack?.frames.first?.symbol?.contains("viewsAgreeMarker") == true)
        #expect(report.callTree?.first.map { CallTreeView.functionName($0.frame) }?.isEmpty == false)
    }

    @Test func theHTMLPageShowsTheCauseItsEvidenceAndTheBlockingThread() {
        var page = HTMLReport()
        let report = ReportFixtures.diagnosedLock
        page.add(report, path: "lock.json")
        let html = page.render()
        #expect(html.contains("<h3>Evidence</h3>"))
        for sentence in report.cause?.evidence ?? [] { #expect(html.contains(HTMLReportEscaping.escape(sentence))) }
        #expect(html.contains("<th>Blocking thread</th><td>4250 db-writer (D, fsync)"))
    }
}
