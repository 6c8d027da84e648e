// The golden report of a hung await: a Swift task suspended on another task that waits on a continuation.
import Foundation
import StallWatch

extension ReportFixtures {
    /// Fixtures/diagnosed/<name>.json: reports of Swift tasks (no thread is stuck: no samples, no threads).
    package static let concurrency: [(name: String, report: StallReport)] = [("hung-await", hungAwait)]

    /// A request handler's task waits on another task's value, which waits on a reply nobody sends; another task
    /// hung at the same site is folded in. Ended: the reply came 12.5 s after the wait began.
    package static let hungAwait: StallReport = {
        var async = [
            StackFrame(
                address: 0x55d0a0005200, image: demo, offset: 0x5200,
                symbol: "(1) await resume partial function for ChatDemo.Server.fetchProfile(for: ChatDemo.User) async "
                    + "-> ChatDemo.Profile",
                symbolOffset: 0, file: "/src/chat-demo/Sources/ChatDemo/Server.swift", line: 201),
            StackFrame(
                address: 0x55d0a0005480, image: demo, offset: 0x5480,
                symbol: "(2) await resume partial function for ChatDemo.Server.handle(request: ChatDemo.Request) "
                    + "async -> ()",
                symbolOffset: 0, file: "/src/chat-demo/Sources/ChatDemo/Server.swift", line: 118),
        ]
        for index in async.indices { async[index].kind = .async }
        var report = StallReport(
            id: "20261201T110000.000Z-4242-12", status: .ended, severity: .hang,
            startedAt: date("2026-12-01T11:00:00.000Z"), endedAt: date("2026-12-01T11:00:12.500Z"),
            durationMs: 12500,
            detection: .init(
                source: "concurrency-tasks", strategy: .deadline, thresholdMs: 10000, hangThresholdMs: 10000,
                detectedAt: date("2026-12-01T11:00:10.004Z"), latencyMs: 4),
            process: .init(
                pid: 4242, executable: demo, buildId: "3f9a1c0e5b7d2468ace013579bdf2468ace01357", host: "web-1"),
            loop: .init(name: "concurrency-tasks", threadId: 4251, phase: "suspended", iteration: 3),
            samples: [], images: Array(images.prefix(1)), signature: "5d41402abc4b2a76",
            capture: .init(method: "none", sampleIntervalMs: 0, samplesTaken: 0, samplesFailed: 0))
        report.occurrences = 2
        report.firstSeen = date("2026-12-01T11:00:10.004Z")
        report.lastSeen = date("2026-12-01T11:00:11.020Z")
        report.pointStack = .init(frames: async, count: 1)
        report.task = .init(id: 8812, name: "request 311", priority: 0x15)
        report.hungAwait = .init(
            waitKind: "task", waitAddress: 0x7f3a0c012400,
            chain: [
                .init(
                    id: 8790, name: "profile-cache refill", state: "suspended", waitKind: "continuation",
                    suspendedMs: 10420.5, awaitSite: "withCheckedContinuation(isolation:function:_:)",
                    awaitingFunction: "ProfileCache.refill()")
            ],
            chainEnd: "root", suspendedSince: date("2026-12-01T11:00:00.000Z"), ageIsUpperBound: false,
            awaitSite: "ChatDemo.Server.fetchProfile(for: ChatDemo.User) async -> ChatDemo.Profile",
            awaitingFunction: "Server.fetchProfile(for:)", firstSeen: date("2026-12-01T10:59:59.996Z"), runs: 3,
            foldedTaskIds: [8813])
        report.cause = .init(
            kind: .hungAwait,
            evidence: [
                "task 8812 \"request 311\" awaited another task's completion in Server.fetchProfile(for:) for 12.5 s",
                "the awaited task 8790 \"profile-cache refill\" is suspended, awaiting a continuation in "
                    + "ProfileCache.refill() for 10420.5 ms",
                "the wait ended 12.5 s after it began",
            ])
        return report
    }()
}
