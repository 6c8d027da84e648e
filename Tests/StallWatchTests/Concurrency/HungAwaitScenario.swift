// Tasks stuck the ways the hung-await detector must tell apart, each recording its id and when it suspended.
import Foundation
import Synchronization

@testable import StallWatch

/// Three hung awaits (a continuation nobody resumes, a wait on that task's value, a task group's child on another
/// such continuation) beside waits that are not hung: the group's parent (its child carries the wait), a long
/// `Task.sleep`, and an `AsyncStream` consumer waiting for its next element.
final class HungAwaitScenario: Sendable {
    struct Stuck: Sendable {
        var id: UInt64
        var suspendedAt: Date
    }

    let stuck = Mutex<[String: Stuck]>([:])
    private let continuations = Mutex<[String: CheckedContinuation<Void, Never>]>([:])
    private let tasks = Mutex<[Task<Void, Never>]>([])
    private let stream: AsyncStream<Int>
    private let feed: AsyncStream<Int>.Continuation

    static let hung = ["first", "second", "child"]
    static let notHung = ["parent", "sleeper", "consumer"]

    init() { (stream, feed) = AsyncStream.makeStream(of: Int.self) }

    func start() {
        let first = Task.detached(name: "replyNeverComes") { await self.awaitReplyThatNeverComes() }
        let second = Task.detached(name: "waitsOnFirst") { await self.awaitFirstTask(first) }
        let group = Task.detached { await self.groupParent() }
        let sleeper = Task.detached { await self.sleepLong() }
        let consumer = Task.detached { await self.consume() }
        tasks.withLock { $0 = [first, second, group, sleeper, consumer] }
    }

    var ids: [String: UInt64] { stuck.withLock { $0.mapValues(\.id) } }

    private func record(_ key: String) {
        let id = ConcurrencyWatchdog.currentTaskID ?? 0
        stuck.withLock { $0[key] = Stuck(id: id, suspendedAt: Date()) }
    }

    @inline(never)
    func awaitReplyThatNeverComes() async {
        await withCheckedContinuation { continuation in
            continuations.withLock { $0["first"] = continuation }
            record("first")
        }
    }

    @inline(never)
    func awaitFirstTask(_ first: Task<Void, Never>) async {
        record("second")
        await first.value
    }

    @inline(never)
    func groupParent() async {
        record("parent")
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.groupChildWaits() }
        }
    }

    @inline(never)
    func groupChildWaits() async {
        await withCheckedContinuation { continuation in
            continuations.withLock { $0["child"] = continuation }
            record("child")
        }
    }

    @inline(never)
    func sleepLong() async {
        record("sleeper")
        try? await Task.sleep(for: .seconds(30))
    }

    @inline(never)
    func consume() async {
        record("consumer")
        for await _ in stream {}
    }

    /// Resumes the task waiting under `key` ("first" or "child"); returns when it was resumed.
    @discardableResult
    func resume(_ key: String) -> Date {
        let continuation = continuations.withLock { $0.removeValue(forKey: key) }
        let now = Date()
        continuation?.resume()
        return now
    }

    /// Lets every task finish.
    func finish() {
        resume("first")
        resume("child")
        feed.finish()
        for task in tasks.withLock({ $0 }) { task.cancel() }
    }
}

/// An `async let` child awaiting a continuation nobody resumes, under a parent that awaits the child.
final class AsyncLetHang: Sendable {
    let ids = Mutex<[String: UInt64]>([:])
    private let continuation = Mutex<CheckedContinuation<Void, Never>?>(nil)

    func start() {
        Task.detached { await self.parentAwaitsItsAsyncLet() }
    }

    private func record(_ key: String) {
        let id = ConcurrencyWatchdog.currentTaskID ?? 0
        ids.withLock { $0[key] = id }
    }

    @inline(never)
    func parentAwaitsItsAsyncLet() async {
        record("parent")
        async let reply: Void = asyncLetChildWaits()
        await reply
    }

    @inline(never)
    func asyncLetChildWaits() async {
        await withCheckedContinuation { continuation in
            self.continuation.withLock { $0 = continuation }
            record("child")
        }
    }

    /// Resumes the child (once); returns when.
    @discardableResult
    func resume() -> Date {
        let continuation = continuation.withLock { $0.take() }
        let now = Date()
        continuation?.resume()
        return now
    }
}
