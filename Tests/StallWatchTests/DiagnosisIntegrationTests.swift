// Runs every demo stall kind and checks the diagnosis in its report: cause, blocking thread, thread stacks.
import Foundation
import StallWatchTestSupport
import Testing

@testable import StallWatch

@Suite(.offPool, .serialized) struct DiagnosisIntegrationTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var kind: String
        var cause: StallReport.Cause.Kind
        /// The name of the worker thread the cause must name as blocking (kernel comm, 15 bytes at most).
        var blockingThread: String?
        var testDescription: String { kind }
    }

    static let cases: [Case] = [
        Case(kind: "cpu", cause: .cpu),
        Case(kind: "sleep", cause: .sleep),
        Case(kind: "io", cause: .io),
        Case(kind: "lock", cause: .lock, blockingThread: "demo-lock-holde"),
        // Swift's Mutex records its owner in its futex word (a priority-inheritance lock).
        Case(kind: "swift-mutex", cause: .lock, blockingThread: "demo-mutex-hold"),
        Case(kind: "contention", cause: .lock, blockingThread: "demo-db-writer"),
        Case(kind: "deadlock", cause: .deadlock, blockingThread: "demo-ledger-wor"),
        Case(kind: "reentrant", cause: .deadlock),
    ]

    static func runDemo(kind: String, directory: String) throws -> StallReport {
        let result = try Fixtures.run(
            Fixtures.executable("stallwatch-demo"),
            [
                "stall", "--kind", kind, "--duration-ms", "750", "--threshold-ms", "250", "--delay-ms", "300",
                "--report-dir", directory,
            ])
        #expect(result.status == 0, "demo failed: \(result.stderr)")
        let reports = try Fixtures.reports(in: directory)
        try #require(reports.count == 1, "expected one report, found \(reports.count)")
        return reports[0]
    }

    @Test(.timeLimit(.minutes(5)), arguments: cases)
    func eachKindOfStallGetsTheRightCause(_ c: Case) throws {
        let directory = Fixtures.temporaryDirectory("diagnosis-\(c.kind)")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let report = try Self.runDemo(kind: c.kind, directory: directory)
        let cause = try #require(report.cause)
        // The demo's CPU stall spins until its time is up: on a machine that gave the loop less than a CPU's
        // share, the documented verdict is `starved`, with the run queue's figures as its evidence.
        let samples = report.samples.map {
            "\($0.thread?.state ?? "?") \($0.thread?.syscall ?? "-") \($0.frames.prefix(2).compactMap(\.symbol)) \($0.error ?? "")"
        }
        #expect(cause.matches(c.cause), "evidence: \(cause.evidence); samples: \(samples)")
        #expect(!cause.evidence.isEmpty)

        // Every sample carries the loop thread's kernel-side state.
        #expect(report.samples.allSatisfy { $0.thread != nil })
        // Every thread of the process (but the watchdog's), the loop thread first, with its stack.
        let threads = try #require(report.threads)
        #expect(threads.first?.threadId == report.loop.threadId)
        #expect(threads.first?.frames.isEmpty == false)

        if let name = c.blockingThread {
            let blocking = try #require(cause.blockingThreadId, "no blocking thread: \(cause.evidence)")
            let thread = try #require(threads.first { $0.threadId == blocking })
            #expect(thread.name == name)
            #expect(!thread.frames.isEmpty, "the blocking thread's stack is in the report: \(thread.error ?? "")")
            // The evidence says where the lock recorded its owner.
            #expect(
                cause.evidence.contains {
                    $0.hasPrefix("the lock is held by thread \(blocking)") && $0.contains(", as its ")
                },
                "\(cause.evidence)")
        }
        if c.kind == "deadlock" {
            let cycle = try #require(cause.deadlockedThreadIds)
            #expect(cycle.count == 2)
            #expect(cycle.first == report.loop.threadId)
            #expect(cycle.last == cause.blockingThreadId)
        }
        if c.kind == "reentrant" { #expect(cause.deadlockedThreadIds == [report.loop.threadId]) }

        let context = try #require(report.context)
        #expect(context.processCpuPercent != nil)
        #expect(context.loadAverage?.count == 3)
        try Fixtures.expectReportsValidate(in: directory)
    }
}
