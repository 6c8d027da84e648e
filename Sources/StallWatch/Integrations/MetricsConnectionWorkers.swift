// MetricsConnectionWorkers: a few threads that answer metrics connections side by side, each within a deadline.
import Dispatch
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A fixed set of named threads (`stallwatch-http-N`) taking accepted connections from a queue, so that idle or
/// slow clients cannot make a scrape wait behind them: with 8 workers and each connection bounded by a total
/// deadline, 5 idle connections leave 3 workers free, and more only delay a scrape by one deadline at most.
final class MetricsConnectionWorkers: Sendable {
    private let pending = Mutex<(fds: [Int32], stopping: Bool)>(([], false))
    private let available = DispatchSemaphore(value: 0)
    private let threads = Mutex<[NamedThread]>([])
    /// Connections waiting beyond this many are closed at once rather than queued.
    private let queueLimit = 64

    /// Starts `count` workers, each calling `handle` for a connection and closing it afterwards.
    init(count: Int, handle: @escaping @Sendable (Int32) -> Void) throws(StallWatchError) {
        var started: [NamedThread] = []
        for index in 0..<max(1, count) {
            started.append(
                try NamedThread(name: "stallwatch-http-\(index)") { [self] in
                    while let fd = next() {
                        handle(fd)
                        close(fd)
                    }
                })
        }
        threads.withLock { $0 = started }
    }

    /// Queues an accepted connection (closing it when the queue is full or the workers are stopping).
    func submit(_ fd: Int32) {
        let queued = pending.withLock { state in
            guard !state.stopping, state.fds.count < queueLimit else { return false }
            state.fds.append(fd)
            return true
        }
        if queued { available.signal() } else { close(fd) }
    }

    /// Stops taking connections, closes the queued ones, and joins the workers (each finishes its connection
    /// within the deadline).
    func stop() {
        let (queued, workers) = pending.withLock { state -> ([Int32], Int) in
            state.stopping = true
            defer { state.fds.removeAll() }
            return (state.fds, threads.withLock { $0.count })
        }
        for fd in queued { close(fd) }
        for _ in 0..<workers { available.signal() }
        for thread in threads.withLock({ $0 }) { thread.join() }
        threads.withLock { $0.removeAll() }
    }

    private func next() -> Int32? {
        while true {
            available.wait()
            let taken: Int32?? = pending.withLock { state in
                if state.stopping { return .some(nil) }
                return state.fds.isEmpty ? nil : .some(state.fds.removeFirst())
            }
            if let taken { return taken }
        }
    }
}
