// Runs the demo service with the embedded watchdog for each stall kind and checks the report it leaves.
import Foundation
import StallWatchTestSupport
import Testing

@testable import StallWatch

@Suite(.offPool, .serialized) struct DemoStallIntegrationTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var kind: String
        /// The demo's function the samples must name.
        var function: String
        /// libc functions one of which the samples must show the loop blocked in (empty: on CPU).
        var libcCalls: [String]
        var testDescription: String { kind }
    }

    static let cases: [Case] = [
        Case(kind: "cpu", function: "stallOnCPU", libcCalls: []),
        Case(kind: "sleep", function: "stallInSleep", libcCalls: ["nanosleep", "clock_nanosleep"]),
        Case(
            kind: "lock", function: "stallOnLock",
            libcCalls: ["pthread_mutex_lock", "__lll_lock_wait", "__pthread_mutex_lock"]),
        Case(
            kind: "io", function: "stallOnDiskIO",
            libcCalls: ["fsync", "write", "__libc_write", "fdatasync", "__GI___libc_write"]),
    ]

    @Test(.timeLimit(.minutes(2)), arguments: cases)
    func eachKindOfStallLeavesOneEndedReportNamingTheStallingFunction(_ c: Case) throws {
        let directory = Fixtures.temporaryDirectory("demo-\(c.kind)")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let thresholdMs = 250.0, durationMs = 750.0
        let result = try Fixtures.run(
            Fixtures.executable("stallwatch-demo"),
            [
                "stall", "--kind", c.kind, "--duration-ms", "\(Int(durationMs))", "--threshold-ms",
                "\(Int(thresholdMs))",
                "--delay-ms", "300", "--report-dir", directory,
            ])
        #expect(result.status == 0, "demo failed: \(result.stderr)")

        let reports = try Fixtures.reports(in: directory)
        try #require(reports.count == 1, "expected one report, found \(reports.count): \(result.stdout)")
        let report = reports[0]
        #expect(report.status == .ended)
        #expect(report.severity == .stall)
        // Against the stall as the program timed it: a disk the machine shares can make the io stall's last fsync
        // overrun the asked-for time.
        let ran = try #require(
            Fixtures.demoStallsRanMs(result.stderr).first,
            "the demo did not say how long its stall ran: \(result.stderr)")
        #expect(ran >= durationMs, "the demo's stall ran \(ran) ms")
        #expect(
            report.durationMs >= ran * 0.9 && report.durationMs <= ran + 100,
            "duration \(report.durationMs), the demo's stall ran \(ran) ms")
        #expect(report.detection.source == "in-process")
        #expect(report.detection.thresholdMs == thresholdMs)
        #expect(report.loop.name == "demo")
        #expect(report.loop.threadId == report.process.pid, "the demo runs its loop on the main thread")
        #expect(report.samples.count >= 2)
        #expect(report.capture.samplesTaken == report.samples.count)

        let symbols = report.samples.flatMap(\.frames).compactMap(\.symbol)
        #expect(
            symbols.contains { $0.contains("Stalls.\(c.function)") }, "no frame names \(c.function): \(Set(symbols))")
        if !c.libcCalls.isEmpty {
            // The innermost frames of the samples: the loop was blocked in libc.
            let innermost = report.samples.compactMap { $0.frames.first?.symbol }
            #expect(
                innermost.contains { s in c.libcCalls.contains { s.contains($0) } },
                "no sample blocked in \(c.libcCalls): \(innermost)")
        }
        for frame in report.samples.flatMap(\.frames) {
            #expect(frame.address != 0)
        }
        #expect(report.images.contains { $0.path.hasSuffix("/stallwatch-demo") && $0.buildId != nil })
        #expect(report.signature != "unknown")
        try Fixtures.expectReportsValidate(in: directory)
    }

    @Test(.timeLimit(.minutes(2)))
    func fiveIdenticalStallsFoldIntoOneReportWithOccurrencesFive() throws {
        let directory = Fixtures.temporaryDirectory("demo-repeat")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let result = try Fixtures.run(
            Fixtures.executable("stallwatch-demo"),
            [
                "stall", "--kind", "sleep", "--duration-ms", "300", "--threshold-ms", "100", "--delay-ms", "100",
                "--repeat", "5", "--report-dir", directory,
            ])
        #expect(result.status == 0, "demo failed: \(result.stderr)")
        // A loaded machine may hold the loop up between the stalls, long enough for a report of its own: `starved`,
        // with the run queue as evidence, is the documented verdict for that and blames nothing in the program (its
        // ended line says `starved`); it is none of the five.
        let all = try Fixtures.reports(in: directory)
        let machine = all.filter { $0.cause?.isStarvedByTheMachine == true }
        let endedLines = result.stdout.split(separator: "\n").filter { $0.contains(#""event":"ended""#) }
        // Every stall is still announced as it ends…
        let stallsEnded = endedLines.filter { line in !machine.contains { line.contains(#""id":"\#($0.id)""#) } }
        #expect(stallsEnded.count == 5, "\(endedLines)")
        // …but the repeats of one signature are counted in the first report instead of written again.
        let reports = all.filter { $0.cause?.isStarvedByTheMachine != true }
        // On failure, what kept the stalls apart: each report's signature, cause, duration, point stack's top, the
        // cause's evidence and the capture's errors.
        try #require(
            reports.count == 1,
            "\(reports.map { ($0.id, $0.signature, $0.cause?.kind.rawValue ?? "-", $0.durationMs, $0.pointStack?.frames.first?.symbol ?? "-", $0.cause?.evidence ?? [], $0.capture.errors) })"
        )
        #expect(reports[0].occurrences == 5)
        #expect(reports[0].status == .ended)
        let first = try #require(reports[0].firstSeen)
        let last = try #require(reports[0].lastSeen)
        #expect(last.timeIntervalSince(first) > 1.0)
        try Fixtures.expectReportsValidate(in: directory)
    }

    @Test func badArgumentsExitWithUsageErrors() throws {
        let result = try Fixtures.run(Fixtures.executable("stallwatch-demo"), ["stall", "--kind", "disk"])
        #expect(result.status == 2)
        #expect(result.stderr.contains("--kind disk: expected one of cpu, sleep, lock, io"))
    }
}
