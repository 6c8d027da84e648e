// The hung-await demo as a process of its own: its three stuck tasks reported with the chain and their ages,
// nothing else over the run, `stallwatch tasks --hung` listing the same three, and a resumed task's report ended.
import Foundation
import StallWatchTestSupport
import Testing

@testable import StallWatch
@testable import StallWatchCommands

#if canImport(Glibc)
    import Glibc
#endif

/// One run of the demo: its settings and what it must show.
struct HungAwaitDemoRun: Sendable {
    var thresholdMs: Int
    var durationMs: Int
    var resumeAfterMs: Int
    var cyclingTasks: Int

    struct Announcement: Decodable {
        var event: String
        var function: String
        var taskID: UInt64
        /// When the demo printed it, by its own clock (seconds since 1970).
        var at: Double
    }

    static let hung = ["awaitReplyThatNeverComes", "awaitFirstTask", "groupChildWaits"]
    static let resumed = "awaitReplyThatComesLate"
    static let notHung = ["groupParent", "streamConsumer", "longSleeper"]

    /// Waits without blocking a pool thread (this test is a pool job too).
    static func settle(timeout: Duration, _ condition: () -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while !condition(), ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(20)) }
        return condition()
    }

    func check() async throws {
        let directory = Fixtures.temporaryDirectory("demo-hung-await")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let demo = try Spawned(
            Fixtures.executable("stallwatch-demo"),
            [
                "stall", "--loop", "concurrency", "--kind", "hung-await", "--duration-ms", "\(durationMs)",
                "--resume-after-ms", "\(resumeAfterMs)", "--cycling-tasks", "\(cyclingTasks)",
            ],
            environment: [
                "STALLWATCH_HEARTBEAT_DIRECTORY": directory, "STALLWATCH_REPORT_DIRECTORY": directory,
                "STALLWATCH_HUNG_AWAIT_THRESHOLD_MS": "\(thresholdMs)",
            ])
        defer {
            kill(demo.pid, SIGKILL)
            demo.wait(timeout: .seconds(10))
        }
        // Each waiting task says so, with the time by the demo's clock, just before it suspends: its age's truth.
        var seenAt: [String: Date] = [:]
        func announcements() -> [String: UInt64] {
            var ids: [String: UInt64] = [:]
            for line in demo.stdout.split(separator: "\n") {
                guard let a = try? JSONDecoder().decode(Announcement.self, from: Data(line.utf8)),
                    a.event == "stuckTask"
                else { continue }
                ids[a.function] = a.taskID
                seenAt[a.function] = Date(timeIntervalSince1970: a.at)
            }
            return ids
        }
        let all = Self.hung + [Self.resumed] + Self.notHung
        #expect(await Self.settle(timeout: .seconds(30)) { announcements().count == all.count }, "\(demo.stderr)")
        let ids = announcements()
        let hungIDs = Set(Self.hung.compactMap { ids[$0] })
        try #require(hungIDs.count == 3)
        let resumedID = try #require(ids[Self.resumed])

        // Reported, and the resumed task's report ended: then `tasks --hung` lists exactly the three.
        func reports() -> [StallReport] { (try? Fixtures.reports(in: directory)) ?? [] }
        let reportedAndEnded = {
            let reports = reports()
            return hungIDs.allSatisfy { id in reports.contains { $0.task?.id == id } }
                && reports.contains { $0.task?.id == resumedID && $0.status == .ended }
        }
        #expect(
            await Self.settle(timeout: .milliseconds(thresholdMs + resumeAfterMs) + .seconds(30), reportedAndEnded),
            "\(reports().map { ($0.task?.id, $0.status) }) \(demo.stderr)")
        let (code, output) = CapturedConsole.run([
            "tasks", "-p", "\(demo.pid)", "--heartbeat-dir", directory, "--hung", "\(thresholdMs)ms", "--json",
        ])
        #expect(code == .ok, "\(output.standardError)")
        let listed = try JSONDecoder().decode(TasksCommandTests.Listing.self, from: Data(output.standardOutput.utf8))
        #expect(Set(listed.tasks.map(\.id)) == hungIDs)

        // The demo exits 0 once everything was reported and its quiet run is over.
        #expect(
            await Self.settle(timeout: .milliseconds(durationMs) + .seconds(60)) { demo.wait(timeout: .zero) != nil })
        #expect(demo.wait(timeout: .zero) == 0, "\(demo.stderr)")
        try Fixtures.expectReportsValidate(in: directory)
        let final = reports()
        // No other report over the whole run: not the cycling tasks, the consumer, the sleeper or the group's parent.
        #expect(final.count == 4, "\(final.map { ($0.task?.id, $0.cause?.kind, $0.hungAwait?.awaitSite) })")
        for report in final {
            #expect(report.cause?.kind == .hungAwait)
            let id = try #require(report.task?.id)
            #expect(hungIDs.contains(id) || id == resumedID)
            let function = try #require(ids.first { $0.value == id }?.key)
            #expect(report.hungAwait?.awaitingFunction?.contains(function) == true, "\(function): \(report.hungAwait)")
            // The age, against when the demo announced the wait.
            let truth = try #require(seenAt[function])
            #expect(abs(report.startedAt.timeIntervalSince(truth)) < 1, "\(function)")
        }
        let second = try #require(final.first { $0.task?.id == ids["awaitFirstTask"] })
        #expect(second.hungAwait?.waitKind == "task")
        #expect(second.hungAwait?.chain.first?.id == ids["awaitReplyThatNeverComes"])
        #expect(second.hungAwait?.chain.first?.waitKind == "continuation")
        let child = try #require(final.first { $0.task?.id == ids["groupChildWaits"] })
        #expect(child.hungAwait?.awaitedBy?.contains { $0.id == ids["groupParent"] } == true)
        let ended = try #require(final.first { $0.task?.id == resumedID })
        #expect(ended.status == .ended)
        #expect(abs(ended.durationMs - Double(resumeAfterMs)) < 1000, "\(ended.durationMs) ms")
        #expect(ended.cause?.evidence.contains { $0.hasPrefix("the wait ended") } == true)
    }
}

@Suite(.serialized, .offPool) struct HungAwaitDemoTests {
    /// A short run for the default suite: a 2 s threshold, the fourth task resumed after 3.5 s, 200 cycling tasks.
    @Test(.timeLimit(.minutes(3)))
    func theDemosThreeStuckTasksAreReportedAndNothingElse() async throws {
        try await HungAwaitDemoRun(thresholdMs: 2000, durationMs: 8000, resumeAfterMs: 3500, cyclingTasks: 200).check()
    }
}

/// This module's stress tests: each runs alone, after the suite (`STALLWATCH_STRESS=1 swift test --filter
/// '\.StressTests/'`, as `scripts/test.sh` does).
@Suite(
    .serialized, .offPool,
    .enabled(
        if: StallWatchEnvironmentVariable.stress.value == "1",
        "runs alone: STALLWATCH_STRESS=1 swift test --filter '\\.StressTests/'"))
enum StressTests {}

extension StressTests {
    /// The run: 1,000 cycling tasks, a 5 s threshold, `--hung 5s`, the fourth task resumed after 8 s, and
    /// 60 s without another report.
    @Suite struct HungAwaitDemoLong {
        @Test(.timeLimit(.minutes(4)))
        func theDemosThreeStuckTasksAreReportedAndNothingElseOverAMinute() async throws {
            try await HungAwaitDemoRun(thresholdMs: 5000, durationMs: 60000, resumeAfterMs: 8000, cyclingTasks: 1000)
                .check()
        }
    }
}
