// Hung awaits in this process: each stuck task is one report with its wait, the chain, its age and its end.
import Foundation
import StallWatchTestSupport
import Synchronization
import Testing

@testable import StallWatch

extension ConcurrencyWatchdogTests {
    /// The hung-await reports of the pool watchdog, as they begin and end.
    final class HungAwaitEvents: Sendable {
        private let began = Mutex<[StallReport]>([])
        private let ended = Mutex<[StallReport]>([])

        func observe(_ event: StallEvent) {
            switch event {
            case .began(let report) where report.cause?.kind == .hungAwait: began.withLock { $0.append(report) }
            case .ended(let report) where report.cause?.kind == .hungAwait: ended.withLock { $0.append(report) }
            default: break
            }
        }

        func began(task id: UInt64?) -> StallReport? { began.withLock { $0.first { $0.task?.id == id } } }
        func ended(task id: UInt64?) -> StallReport? { ended.withLock { $0.first { $0.task?.id == id } } }
    }

    static func seconds(_ a: Date, _ b: Date) -> Double { abs(a.timeIntervalSince(b)) }

    /// Enables the pool watchdog with the task table and a 1 s hung-await threshold; its hung-await reports land in
    /// the events returned.
    func enableHungAwaits(directory: String) throws -> HungAwaitEvents {
        var config = tableConfiguration(directory: directory, maxTasks: 4096)
        config.hungAwaitThresholdMs = 1000
        let events = HungAwaitEvents()
        try ConcurrencyWatchdog.enable(configuration: config) { events.observe($0) }
        return events
    }

    @Test(.timeLimit(.minutes(2)))
    func tasksSuspendedPastTheThresholdAreReportedWithTheirWaitTheChainAndTheirAge() async throws {
        let directory = Fixtures.temporaryDirectory("hung-await")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let events = try enableHungAwaits(directory: directory)
        defer { ConcurrencyWatchdog.disable() }
        let scenario = HungAwaitScenario()
        scenario.start()
        defer { scenario.finish() }

        #expect(await Self.settle { scenario.ids.count == 6 })
        let ids = scenario.ids
        #expect(await Self.settle { HungAwaitScenario.hung.allSatisfy { events.began(task: ids[$0]) != nil } })
        // One more threshold and a half for a report that should not come.
        try await Task.sleep(for: .milliseconds(1500))
        for key in HungAwaitScenario.notHung { #expect(events.began(task: ids[key]) == nil, "\(key) was reported") }
        let stuck = scenario.stuck.withLock { $0 }

        let first = try #require(events.began(task: ids["first"]))
        let firstWait = try #require(first.hungAwait)
        #expect(firstWait.waitKind == "continuation")
        #expect(firstWait.awaitingFunction?.contains("awaitReplyThatNeverComes") == true, "\(firstWait)")
        #expect(first.task?.name == "replyNeverComes")
        #expect(first.pointStack?.frames.contains { $0.symbol?.contains("awaitReplyThatNeverComes") == true } == true)
        // Its age, against the task's own record of when it suspended.
        let firstSince = try #require(stuck["first"]?.suspendedAt)
        #expect(Self.seconds(firstWait.suspendedSince, firstSince) < 1)
        #expect(abs(first.durationMs - first.detection.detectedAt.timeIntervalSince(firstSince) * 1000) < 1000)

        let second = try #require(events.began(task: ids["second"]))
        let secondWait = try #require(second.hungAwait)
        #expect(secondWait.waitKind == "task")
        #expect(secondWait.awaitingFunction?.contains("awaitFirstTask") == true, "\(secondWait)")
        let link = try #require(secondWait.chain.first)
        #expect(link.id == ids["first"] && link.state == "suspended" && link.waitKind == "continuation")
        #expect(secondWait.chainEnd == "root")

        let child = try #require(events.began(task: ids["child"]))
        let childWait = try #require(child.hungAwait)
        #expect(childWait.waitKind == "continuation")
        #expect(childWait.awaitingFunction?.contains("groupChildWaits") == true, "\(childWait)")
        #expect(childWait.awaitedBy?.contains { $0.id == ids["parent"] && $0.via == "taskGroup" } == true)

        // Resumed: its report ends, at the moment it was resumed; the task waiting on it ends with it.
        let resumed = scenario.resume("first")
        #expect(
            await Self.settle { events.ended(task: ids["first"]) != nil && events.ended(task: ids["second"]) != nil })
        let ended = try #require(events.ended(task: ids["first"]))
        #expect(ended.status == .ended)
        let endedAt = try #require(ended.endedAt)
        #expect(Self.seconds(endedAt, resumed) < 1)
        #expect(abs(ended.durationMs - resumed.timeIntervalSince(firstSince) * 1000) < 1000)
        #expect(ended.cause?.evidence.contains { $0.hasPrefix("the wait ended") } == true)
        #expect(events.ended(task: ids["child"]) == nil)
    }

    /// An `async let` child's job end says nothing of its state (its memory is its parent's, so nothing reads it
    /// after the job): its row says `unknown`, and once past the threshold the task read from memory is a hung await,
    /// awaited by its parent through the `async let`. The parent, waiting on its own child, is not reported.
    @Test(.timeLimit(.minutes(2)))
    func anAsyncLetChildThatNeverFinishesIsReportedAsAwaitedByItsParent() async throws {
        let directory = Fixtures.temporaryDirectory("hung-await-async-let")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let events = try enableHungAwaits(directory: directory)
        defer { ConcurrencyWatchdog.disable() }
        let hang = AsyncLetHang()
        hang.start()
        defer { hang.resume() }

        #expect(await Self.settle { hang.ids.withLock { $0.count } == 2 })
        let ids = hang.ids.withLock { $0 }
        #expect(await Self.settle { events.began(task: ids["child"]) != nil })
        let child = try #require(events.began(task: ids["child"]))
        let wait = try #require(child.hungAwait)
        #expect(wait.waitKind == "continuation")
        #expect(wait.awaitingFunction?.contains("asyncLetChildWaits") == true, "\(wait)")
        #expect(wait.awaitedBy?.contains { $0.id == ids["parent"] && $0.via == "asyncLet" } == true, "\(wait)")
        #expect(events.began(task: ids["parent"]) == nil)

        let resumed = hang.resume()
        #expect(await Self.settle { events.ended(task: ids["child"]) != nil })
        let ended = try #require(events.ended(task: ids["child"]))
        #expect(ended.status == .ended)
        #expect(Self.seconds(try #require(ended.endedAt), resumed) < 1)
    }
}
