// Runs real EventLoops on real threads and checks what observers, timers and sources see.
import Dispatch
import Foundation
import StallWatchTestSupport
import Synchronization
import Testing

@testable import StallWatch

/// Collects values from any thread.
final class Recorder<T: Sendable>: Sendable {
    private let items = Mutex<[T]>([])
    func append(_ item: T) { items.withLock { $0.append(item) } }
    var values: [T] { items.withLock { $0 } }
}

/// Runs `loop` on a new named thread; returns once it is running.
func startLoopThread(_ loop: EventLoop, name: String = "test-loop") -> Thread {
    let started = DispatchSemaphore(value: 0)
    loop.perform { started.signal() }
    let thread = Thread { loop.run() }
    thread.name = name
    thread.start()
    started.wait()
    return thread
}

@Suite(.offPool) struct EventLoopTests {
    /// Out of descriptors, creating a loop is an error naming the call and its errno, not a crash. In a process of
    /// its own (an exit test): the lowered descriptor limit would starve every other test of this process.
    @Test func aLoopCreatedWithNoDescriptorLeftThrowsNamingEventfd() async {
        await #expect(processExitsWith: .success) {
            // The limit is set just above the highest descriptor open now, and what is left below it is taken.
            let open = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
            let highest = open.compactMap { Int($0) }.max() ?? 2
            var limit = rlimit()
            getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
            limit.rlim_cur = rlim_t(highest + 1)
            guard setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { exit(4) }
            while dup(2) >= 0 {}
            guard errno == EMFILE else { exit(5) }
            do throws(StallWatchError) {
                _ = try EventLoop(name: "starved", mainQueue: .disabled)
                exit(1)
            } catch {
                let named = error.code == .systemCall && error.context["call"] == "eventfd" && error.errno == EMFILE
                exit(named && error.message.hasPrefix("eventfd: ") ? 0 : 2)
            }
        }
    }

    @Test(.timeLimit(.minutes(3)))
    func activitiesOfAnIterationHoldingATimerAndAPerformComeInCFRunLoopOrder() throws {
        let loop = try EventLoop(name: "order", mainQueue: .disabled)
        let log = Recorder<String>()
        let observer = loop.addObserver(activities: .allActivities) { log.append($0.description) }
        loop.schedule(after: .milliseconds(30)) {
            log.append("timer")
            loop.perform {
                log.append("perform")
                loop.stop()
            }
        }
        loop.run()
        loop.removeObserver(observer)

        let entries = log.values
        #expect(entries.first == "entry")
        #expect(entries.last == "exit")
        // An iteration is beforeTimers → beforeSources → beforeWaiting → afterWaiting, with the timer fired
        // after beforeTimers and the performed block run after beforeSources.
        let timerAt = try! #require(entries.firstIndex(of: "timer"))
        #expect(entries[timerAt - 1] == "beforeTimers")
        #expect(entries[timerAt + 1] == "beforeSources")
        let performAt = try! #require(entries.firstIndex(of: "perform"))
        #expect(entries[performAt - 1] == "beforeSources")
        #expect(entries[performAt + 1] == "exit")
        // Between entry and exit only the four iteration activities repeat, in cycle.
        let cycle = ["beforeTimers", "beforeSources", "beforeWaiting", "afterWaiting"]
        let phases = entries.dropFirst().dropLast().filter { cycle.contains($0) }
        for (i, phase) in phases.enumerated() where i > 0 {
            let previous = phases[phases.index(phases.startIndex, offsetBy: i - 1)]
            let expectedPrevious = cycle[(cycle.firstIndex(of: phase)! + cycle.count - 1) % cycle.count]
            // beforeSources may loop straight back to beforeTimers when work is pending (no wait).
            #expect(previous == expectedPrevious || (phase == "beforeTimers" && previous == "beforeSources"))
        }
        #expect(loop.state.snapshot().activity == .exit)
    }

    @Test(.timeLimit(.minutes(3)))
    func performFromOtherThreadsRunsEveryBlockOnTheLoopThread() throws {
        let loop = try EventLoop(name: "perform", mainQueue: .disabled)
        let thread = startLoopThread(loop)
        let loopTID = loop.threadID
        let seen = Recorder<Int32>()
        let done = DispatchSemaphore(value: 0)
        DispatchQueue.concurrentPerform(iterations: 4) { worker in
            for i in 0..<250 {
                loop.perform {
                    seen.append(StallWatchTestSupport.currentThreadID())
                    if worker == 0 && i == 249 { done.signal() }
                }
            }
        }
        let all = DispatchSemaphore(value: 0)
        loop.perform { all.signal() }
        all.wait()
        done.wait()
        #expect(seen.values.count == 1000)
        #expect(Set(seen.values) == [loopTID!])
        loop.stop()
        _ = thread
    }

    @Test(.timeLimit(.minutes(3)))
    func aRemovedObserverIsNotCalledAgain() throws {
        let loop = try EventLoop(name: "remove", mainQueue: .disabled)
        let calls = Recorder<LoopActivity>()
        let observer = loop.addObserver(activities: .beforeSources) { calls.append($0) }
        let removed = DispatchSemaphore(value: 0)
        loop.perform {
            loop.removeObserver(observer)
            removed.signal()
        }
        _ = startLoopThread(loop)
        removed.wait()
        let countAtRemoval = calls.values.count
        // Several more iterations.
        for _ in 0..<5 {
            let turned = DispatchSemaphore(value: 0)
            loop.perform { turned.signal() }
            turned.wait()
        }
        loop.stop()
        #expect(countAtRemoval >= 1)
        #expect(calls.values.count == countAtRemoval)
        #expect(!observer.isValid)
    }

    @Test(.timeLimit(.minutes(3)))
    func observersAreCalledByOrderAndOneShotObserversOnce() throws {
        let loop = try EventLoop(name: "observer-order", mainQueue: .disabled)
        let log = Recorder<String>()
        loop.addObserver(activities: .beforeSources, order: 10) { _ in log.append("late") }
        loop.addObserver(activities: .beforeSources, order: -5) { _ in log.append("early") }
        loop.addObserver(activities: .beforeSources, order: 0, repeats: false) { _ in log.append("once") }
        let turns = Atomic<Int>(0)
        let timer = loop.schedule(after: .milliseconds(1), repeating: .milliseconds(1)) {}
        loop.addObserver(activities: .beforeWaiting) { _ in
            if turns.add(1, ordering: .relaxed).newValue == 3 { loop.stop() }
        }
        loop.run()
        timer.cancel()
        let values = log.values
        #expect(Array(values.prefix(3)) == ["early", "once", "late"])
        #expect(values.filter { $0 == "once" }.count == 1)
        #expect(values.filter { $0 == "early" }.count >= 3)
    }

    @Test(.timeLimit(.minutes(3)))
    func repeatingTimersFireUntilCancelledAndOneShotsOnce() throws {
        let loop = try EventLoop(name: "timers", mainQueue: .disabled)
        let fires = Recorder<String>()
        let repeating = loop.schedule(after: .milliseconds(5), repeating: .milliseconds(5)) { fires.append("r") }
        loop.schedule(after: .milliseconds(2)) { fires.append("once") }
        loop.schedule(after: .milliseconds(60)) {
            repeating.cancel()
            loop.schedule(after: .milliseconds(40)) { loop.stop() }
        }
        #expect(loop.run(for: .seconds(20)) == .stopped)
        let values = fires.values
        #expect(values.filter { $0 == "once" }.count == 1)
        let repeats = values.filter { $0 == "r" }.count
        #expect(repeats >= 3)
        #expect(repeats <= 13)
    }

    @Test(.timeLimit(.minutes(3)))
    func runForReturnsTimedOutWhenNothingStopsIt() throws {
        let loop = try EventLoop(name: "timeout", mainQueue: .disabled)
        #expect(loop.run(for: .milliseconds(20)) == .timedOut)
        #expect(!loop.isRunning)
    }

    @Test(.timeLimit(.minutes(3)))
    func readSourceHandlersRunOnTheLoopThreadAndStopWhenCancelled() throws {
        let loop = try EventLoop(name: "fd", mainQueue: .disabled)
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        defer {
            close(fds[0])
            close(fds[1])
        }
        let reads = Recorder<Int32>()
        let got = DispatchSemaphore(value: 0)
        let readFD = fds[0]
        let source = loop.addReadSource(fileDescriptor: readFD) {
            var byte: UInt8 = 0
            _ = read(readFD, &byte, 1)
            reads.append(StallWatchTestSupport.currentThreadID())
            got.signal()
        }
        _ = startLoopThread(loop)
        for _ in 0..<3 {
            var byte: UInt8 = 7
            #expect(write(fds[1], &byte, 1) == 1)
            got.wait()
        }
        // The descriptors are closed (defer) only once Dispatch has let go of them.
        #expect(source.cancelAndWait())
        #expect(reads.values.count == 3)
        #expect(Set(reads.values) == [loop.threadID!])
        loop.stop()
    }

    @Test func annotationsAreKeptUntilCleared() throws {
        let loop = try EventLoop(name: "annotations", mainQueue: .disabled)
        loop.annotate("request", "42")
        loop.annotate("route", "/messages")
        #expect(loop.annotations == ["request": "42", "route": "/messages"])
        loop.clearAnnotations()
        #expect(loop.annotations.isEmpty)
    }
}
