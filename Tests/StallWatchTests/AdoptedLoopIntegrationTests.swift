// The demo on a Foundation RunLoop and under dispatchMain() (each needs the main thread of its own process).
import Foundation
import StallWatchTestSupport
import Testing

@testable import StallWatch

@Suite(.offPool, .serialized) struct AdoptedLoopIntegrationTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var loop: String
        var kind: String
        var function: String
        /// The phase a stall in a timer or main-queue block is reported in.
        var phase: String
        var testDescription: String { "\(loop) \(kind)" }
    }

    static let cases: [Case] = [
        Case(loop: "foundation", kind: "cpu", function: "stallOnCPU", phase: "afterWaiting"),
        Case(loop: "foundation", kind: "sleep", function: "stallInSleep", phase: "afterWaiting"),
        Case(loop: "dispatch-main", kind: "cpu", function: "stallOnCPU", phase: "beforeSources"),
        Case(loop: "dispatch-main", kind: "sleep", function: "stallInSleep", phase: "beforeSources"),
    ]

    @Test(.timeLimit(.minutes(2)), arguments: cases)
    func aStallOfThreeThresholdsLeavesOneEndedReportNamingTheStallingFunction(_ c: Case) throws {
        let directory = Fixtures.temporaryDirectory("adopted-\(c.loop)-\(c.kind)")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let thresholdMs = 250.0, durationMs = 750.0, intervalMs = 100.0
        let result = try Fixtures.run(
            Fixtures.executable("stallwatch-demo"),
            [
                "stall", "--loop", c.loop, "--kind", c.kind, "--duration-ms", "\(Int(durationMs))",
                "--threshold-ms", "\(Int(thresholdMs))", "--delay-ms", "300", "--probe-interval-ms",
                "\(Int(intervalMs))",
                "--report-dir", directory,
            ])
        #expect(result.status == 0, "demo failed: \(result.stderr)")

        let reports = try Fixtures.reports(in: directory)
        try #require(reports.count == 1, "expected one report, found \(reports.count): \(result.stdout)")
        let report = reports[0]
        #expect(report.status == .ended)
        #expect(report.severity == .stall)
        #expect(report.loop.name == "demo")
        #expect(report.loop.phase == c.phase)
        // The probe measures from the unanswered ping: up to one interval short. At most 100 ms over the stall as
        // the demo timed it, plus the time its thread then waited for a CPU (a loaded machine holds up the answer
        // to the ping, or the loop's next transition).
        let shortBy = c.loop == "dispatch-main" ? intervalMs : 0
        let ranMs = try #require(Fixtures.demoStallsRanMs(result.stderr).first, "\(result.stderr)")
        let runQueueMs = try #require(Fixtures.demoStallThreadRunQueueMs(result.stderr), "\(result.stderr)")
        #expect(
            report.durationMs >= durationMs * 0.9 - shortBy && report.durationMs <= ranMs + 100 + runQueueMs,
            "duration \(report.durationMs), the stall ran \(ranMs) ms, its thread waited \(runQueueMs) ms for a CPU")
        if c.loop == "foundation" {
            #expect(report.loop.threadId == report.process.pid, "RunLoop.main runs on the main thread")
        }
        let symbols = report.samples.flatMap(\.frames).compactMap(\.symbol)
        // Under dispatchMain() the stuck block runs on a libdispatch worker that blocks every signal: the
        // non-interrupting capture samples it all the same.
        #expect(
            symbols.contains { $0.contains("Stalls.\(c.function)") },
            """
            no frame names \(c.function): \(Set(symbols)) \(report.capture.errors); \(report.samples.count) samples \
            at \(report.samples.map(\.offsetMs)) of \(report.durationMs) ms; notes \(report.notes)
            """)
        let lines = result.stdout.split(separator: "\n")
        #expect(lines.filter { $0.contains(#""event":"began""#) }.count == 1)
        #expect(lines.filter { $0.contains(#""event":"ended""#) && $0.contains(#""status":"ended""#) }.count == 1)
        try Fixtures.expectReportsValidate(in: directory)
    }

    @Test func anUnknownLoopIsAUsageError() throws {
        let result = try Fixtures.run(Fixtures.executable("stallwatch-demo"), ["stall", "--loop", "uv"])
        #expect(result.status == 2)
        #expect(result.stderr.contains("--loop uv: expected one of stallwatch, foundation, dispatch-main"))
    }
}
