// Tests of `stallwatch reports html`: a self-contained page, titles for hover, and a real browser's rendering.
import Foundation
import StallWatchTestSupport
import Testing

@testable import StallWatch
@testable import StallWatchCommands
@testable import StallWatchInspector

@Suite(.offPool) struct HTMLReportTests {
    let reports = ReportFixtures.reportsDirectory.path

    func page(_ arguments: [String]) throws -> String {
        let (code, output) = CapturedConsole.run(["reports", "html"] + arguments)
        try #require(code == .ok, "\(output.standardError)")
        return output.standardOutput
    }

    @Test func aPageIsSelfContainedWithAFlameGraphATimelineAndTheHeader() throws {
        let html = try page(["\(reports)/stall-ended.json"])
        #expect(html.hasPrefix("<!DOCTYPE html>"))
        #expect(!html.contains("<script"), "no script at all")
        let withoutNamespace = html.replacingOccurrences(of: "xmlns=\"http://www.w3.org/2000/svg\"", with: "")
        #expect(!withoutNamespace.contains("http:") && !withoutNamespace.contains("https:"), "nothing from the network")
        #expect(!html.contains("<link"))
        #expect(html.contains("<h1>Stall report 20261130T221500.123Z-4242-3</h1>"))
        #expect(html.contains("<th>Duration</th><td>313 ms (312.5 ms)</td>"))
        #expect(html.components(separatedBy: "<svg").count == 3, "flame graph and timeline")
        // Hover text for every box, with the frame and its share.
        #expect(
            html.contains(
                "<title>ChatDemo.SessionList.sortAndFilter() -&gt; () (chat-demo) ChatDemo/SessionList.swift:42: 1 sample (50.0%)</title>"
            ))
        #expect(html.contains("<title>all samples: 2 (100%)</title>"))
        #expect(html.contains("<title>+251.5 ms: __memmove_avx_unaligned_erms (libc.so.6) (pause 18.5 µs)</title>"))
    }

    @Test func aDirectoryPageSummarisesTheGroupsAndPlotsStallsOverTime() throws {
        let html = try page([reports])
        #expect(html.contains("<h1>3 stall reports</h1>"))
        #expect(html.contains("<td>0b1d2e3f40516273</td>"))
        #expect(html.contains("<title>[no stack]: 1 sample (20.0%)</title>"))
        #expect(
            html.contains(
                "<title>20261201T080000.000Z-977-1: 1m 03s at 2026-12-01 08:00:00, libc.so.6 + 0xa1000</title>"))
    }

    @Test func aReportWithALeadUpShowsItsBarsFindingsAndTopItems() throws {
        let path = ReportFixtures.directory.appendingPathComponent("diagnosed/lock-diagnosed.json").path
        let html = try page([path])
        #expect(html.contains("<h2>Lead-up <span class=\"dim\">(1.00 s before the stall was detected)</span></h2>"))
        #expect(html.components(separatedBy: "<svg").count == 4, "lead-up bars, flame graph and timeline")
        #expect(html.contains("<li>&#39;route=/sessions/sort&#39; ran 165 ms and ended 5 ms before the stuck item"))
        #expect(
            html.contains(
                "<tr><td>route=/sessions/sort</td><td>165 ms</td><td>-420 ms</td><td>3 ms</td><td><details><summary>"
                    + "12 of 16 samples: ChatDemo.Sessions.sortByActivity() -&gt; ()</summary><pre>0x55d0a0004a20 "))
        #expect(html.contains("<td>timer</td><td>5 ms</td><td>-905 ms</td><td>0 ms</td><td>-</td></tr>"))
        #expect(html.contains("stacks: 19 by perf-clock"))
        #expect(html.contains("<title>the stall began</title>"))
    }

    @Test func textIsEscaped() {
        #expect(HTMLReportEscaping.escape("a<b>&\"'") == "a&lt;b&gt;&amp;&quot;&#39;")
    }

    /// Headless Chromium (the Debian package chromium, which `scripts/bootstrap.sh` installs; its absence is a
    /// failure that says so) renders the page, and the screenshot is not blank.
    @Test func headlessChromiumRendersThePageWithContent() throws {
        try #require(
            FileManager.default.isExecutableFile(atPath: "/usr/bin/chromium"),
            "/usr/bin/chromium is missing (the Debian package chromium, scripts/bootstrap.sh)")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("sw-html-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("report.html").path
        let (code, _) = CapturedConsole.run(["reports", "html", "\(reports)/stall-ended.json", "-o", file])
        try #require(code == .ok)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = [
            ReportFixtures.repositoryRoot.appendingPathComponent("scripts/html-screenshot.sh").path, file,
            directory.appendingPathComponent("report.png").path,
        ]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "\(text)")
        #expect(text.contains("non-white"))
    }
}
