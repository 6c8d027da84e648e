// EventLoopThreads: `stall --loop threads`: an epoll server on event-loop threads StallWatch knows by name only.
import CStallWatchCore
import Dispatch
import Foundation
import StallWatch
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// An epoll server run the way SwiftNIO runs one, and not instrumented at all: `count` event-loop threads named
/// `demo-elt-<i>`, each waiting in an epoll of its own on the listening socket they share (`EPOLLEXCLUSIVE`: a
/// connection wakes one of them) and on an eventfd of its own. A connection is answered with the name of the
/// thread that accepted it; a wake-up on a thread's eventfd runs the stall on that thread, as a request handler
/// that blocks would.
final class EventLoopThreads: @unchecked Sendable {  // All lets; each thread uses only its own descriptors.
    static let namePrefix = "demo-elt-"
    let count: Int
    let port: Int
    private let listenFD: Int32
    private let wakeFDs: [Int32]
    private let kind: StallKind
    private let durationMs: Int
    /// Connections answered, by every thread together.
    let answered = Atomic<Int>(0)

    init(count: Int, kind: StallKind, durationMs: Int) throws {
        self.count = count
        self.kind = kind
        self.durationMs = durationMs
        (listenFD, port) = try LoopbackSocket.listen(port: 0)
        wakeFDs = try (0..<count).map { _ in
            let fd = sw_eventfd_create()
            guard fd >= 0 else { throw DemoError("eventfd: \(String(cString: strerror(-fd)))") }
            return fd
        }
    }

    /// Starts the threads and returns once each is about to wait for its first event.
    func start() throws {
        let ready = DispatchSemaphore(value: 0)
        for index in 0..<count {
            let epoll = sw_epoll_create()
            guard epoll >= 0, sw_epoll_add(epoll, listenFD, 1) == 0, sw_epoll_add(epoll, wakeFDs[index], 0) == 0 else {
                throw DemoError("epoll: \(String(cString: strerror(errno)))")
            }
            let thread = Thread { [self] in
                setCurrentThreadName(Self.namePrefix + String(index))
                ready.signal()
                runLoop(index: index, epoll: epoll)
            }
            thread.start()
        }
        for _ in 0..<count { ready.wait() }
    }

    /// Makes thread `index` run the stall (from any thread).
    func stall(thread index: Int) { _ = sw_eventfd_signal(wakeFDs[index]) }

    /// One event loop: wait, then handle what woke it; never returns (the demo exits with the process).
    private func runLoop(index: Int, epoll: Int32) -> Never {
        let name = Self.namePrefix + String(index)
        var ready = [Int32](repeating: -1, count: 16)
        while true {
            let n = sw_epoll_wait(epoll, &ready, Int32(ready.count), -1)
            for fd in ready.prefix(Int(max(0, n))) {
                if fd == listenFD {
                    answerConnections(as: name)
                } else {
                    sw_eventfd_drain(fd)
                    handleWakeUp()
                }
            }
        }
    }

    /// Accepts what is pending and answers each connection with the thread's name.
    private func answerConnections(as name: String) {
        let reply = Array((name + "\n").utf8)
        while true {
            let connection = accept(listenFD, nil, nil)
            guard connection >= 0 else { return }  // EAGAIN: another thread took it, or nothing is left
            _ = reply.withUnsafeBytes { write(connection, $0.baseAddress, $0.count) }
            close(connection)
            answered.add(1, ordering: .relaxed)
        }
    }

    /// The request handler that blocks its event loop.
    @inline(never)
    private func handleWakeUp() {
        Stalls.run(kind, durationMs: durationMs)
    }

    /// A client connecting every `intervalMs` from a thread of its own (`demo-client`), so the loops that do not
    /// stall keep serving while one does.
    func startClient(intervalMs: Int) {
        let port = port
        let thread = Thread {
            setCurrentThreadName("demo-client")
            var buffer = [UInt8](repeating: 0, count: 64)
            while true {
                if let fd = LoopbackSocket.connect(port: port) {
                    while buffer.withUnsafeMutableBytes({ read(fd, $0.baseAddress, $0.count) }) > 0 {}
                    close(fd)
                }
                Stalls.sleepFor(milliseconds: intervalMs)
            }
        }
        thread.start()
    }
}

extension StallCommand {
    /// `--loop threads`: the server above, watched by a ``ThreadWatchdog`` for threads named `demo-elt-*` (unless
    /// `--no-watchdog`: a target for `stallwatch watch --threads`); the last thread stalls. Exits 0 once the last
    /// report is final.
    func runOnEventLoopThreads() -> Never {
        guard kind != .io else {
            fail("--loop threads: --kind io is not detected from /proc (a loop making write calls is progress)")
        }
        let server: EventLoopThreads
        do {
            server = try EventLoopThreads(count: threadCount, kind: kind, durationMs: durationMs)
            try server.start()
        } catch {
            fail("\(error)", code: 1)
        }
        let done = DispatchSemaphore(value: 0)
        let repeatCount = repeatCount
        var watchdog: ThreadWatchdog?
        if watchdogEnabled {
            do {
                watchdog = try ThreadWatchdog.start(
                    threadsNamed: EventLoopThreads.namePrefix + "*", configuration: configuration
                ) { event in
                    EventPrinter.print(event)
                    if case .ended(let report) = event, InjectedStalls.shared.cover(report) == repeatCount {
                        done.signal()
                    }
                }
            } catch {
                fail(error.message, code: 1)
            }
        }
        server.startClient(intervalMs: 20)
        let last = server.count - 1
        for offset in stallOffsets {
            DispatchQueue.global().asyncAfter(deadline: .now() + offset.timeInterval) { server.stall(thread: last) }
        }
        guard watchdogEnabled else {
            // Nobody inside reports the end: exit once a sidecar has had time to see the last stall end.
            let gap = Duration.milliseconds(max(delayMs, 2 * configuration.thresholdMs))
            Thread.sleep(forTimeInterval: ((stallOffsets.last ?? .zero) + .milliseconds(durationMs) + gap).timeInterval)
            exit(0)
        }
        let outcome = done.wait(timeout: .now() + timeLimit.timeInterval)
        watchdog?.stop()
        if outcome == .timedOut {
            fail(
                "timed out waiting for the reports of \(repeatCount) stall(s); "
                    + "\(InjectedStalls.shared.reported) arrived", code: 1)
        }
        exit(0)
    }
}
