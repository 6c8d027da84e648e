// A tiny HTTP/1.0 endpoint for Prometheus scrapes (`--metrics 127.0.0.1:PORT`), on its own thread.
import Dispatch
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Serves `GET /metrics` with the text a closure renders (usually ``StallMetrics/exposition()``): a named thread
/// (`stallwatch-http`) blocked in `accept` hands each connection to one of 8 workers
/// (``MetricsConnectionWorkers``), so scrapes are answered side by side with idle or slow clients.
///
/// For services that have no HTTP server of their own, and for the sidecar CLI's `--metrics HOST:PORT`.
/// Binds to loopback unless told otherwise: metrics name functions and loops, which is nobody else's business.
/// Each connection has a total deadline of 2 s for its request to arrive and its answer to leave, so a stuck
/// or dripping client cannot hold a worker longer.
///
/// ```swift
/// let server = try MetricsHTTPServer(address: "127.0.0.1:9464") { metrics.exposition() }
/// try server.start()
/// ```
public final class MetricsHTTPServer: Sendable {
    /// The bound port (the one the kernel picked when the address asked for port 0).
    package let port: UInt16
    package let host: String
    private let fd: Int32
    private let render: @Sendable () -> String
    private let thread = Mutex<(acceptor: NamedThread, workers: MetricsConnectionWorkers)?>(nil)
    /// The total time a connection may take, from accept to the last byte of the answer.
    static let connectionDeadlineNanos: UInt64 = 2_000_000_000
    private let stopping = Atomic<Bool>(false)
    private let closed = Atomic<Bool>(false)

    /// Binds and listens (so the port is known and taken) without serving yet.
    ///
    /// - Parameters:
    ///   - address: `HOST:PORT` with an IPv4 host (`127.0.0.1`, `0.0.0.0`) or `localhost`; `:PORT` alone means
    ///     loopback. Port 0 lets the kernel pick one (see ``port``).
    ///   - render: Called on the server thread for each scrape.
    /// - Throws: `.invalidConfiguration` for an address that does not parse; `.systemCall` naming the failing
    ///   call (`bind` with `EADDRINUSE`, …).
    public init(address: String = "127.0.0.1:0", render: @escaping @Sendable () -> String) throws(StallWatchError) {
        let (host, requestedPort) = try Self.parse(address)
        self.host = host
        self.render = render
        var sin = sockaddr_in()
        sin.sin_family = sa_family_t(AF_INET)
        sin.sin_port = requestedPort.bigEndian
        guard inet_pton(AF_INET, host, &sin.sin_addr) == 1 else {
            throw StallWatchError(.invalidConfiguration, "metrics address \(address): not an IPv4 address")
        }
        let fd = try Syscall.retrying("socket") {
            socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        }
        do throws(StallWatchError) {
            var one: Int32 = 1
            _ = try Syscall.retrying("setsockopt") {
                setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
            }
            _ = try Self.withSockaddr(&sin) { addr, length throws(StallWatchError) in
                try Syscall.retrying("bind") { bind(fd, addr, length) }
            }
            _ = try Syscall.retrying("listen") { listen(fd, 16) }
            var bound = sockaddr_in()
            _ = try Self.withSockaddr(&bound) { addr, length throws(StallWatchError) in
                var length = length
                return try Syscall.retrying("getsockname") { getsockname(fd, addr, &length) }
            }
            port = UInt16(bigEndian: bound.sin_port)
        } catch {
            close(fd)
            throw error
        }
        self.fd = fd
    }

    deinit {
        stop()
        if !closed.exchange(true, ordering: .acquiringAndReleasing) { close(fd) }
    }

    /// The URL a scraper uses.
    public var url: String { "http://\(host):\(port)/metrics" }

    /// Starts serving on the `stallwatch-http` thread. Does nothing when already serving.
    ///
    /// - Throws: `.systemCall` if the thread cannot start; `.invalidState` after ``stop()``.
    public func start() throws(StallWatchError) {
        try thread.withLock {
            (thread: inout (acceptor: NamedThread, workers: MetricsConnectionWorkers)?) throws(StallWatchError) in
            guard thread == nil else { return }
            guard !stopping.load(ordering: .acquiring) else {
                throw StallWatchError(.invalidState, "the metrics server was stopped; create a new one")
            }
            let workers = try MetricsConnectionWorkers(count: 8) { [self] client in handle(client) }
            thread = (try NamedThread(name: "stallwatch-http") { [self] in serve(workers) }, workers)
        }
    }

    /// Stops serving, joins the thread and closes the listening socket. A server cannot be restarted.
    public func stop() {
        stopping.store(true, ordering: .releasing)
        thread.withLock { thread in
            guard let running = thread else { return }
            // Wakes the thread blocked in accept (which then fails with EINVAL).
            shutdown(fd, Int32(SHUT_RDWR))
            running.acceptor.join()
            running.workers.stop()
            thread = nil
        }
        if !closed.exchange(true, ordering: .acquiringAndReleasing) { close(fd) }
    }

    // MARK: Serving

    private func serve(_ workers: MetricsConnectionWorkers) {
        while !stopping.load(ordering: .acquiring) {
            let client = accept(fd, nil, nil)
            if client < 0 {
                if errno == EINTR || errno == ECONNABORTED || errno == EMFILE || errno == ENFILE { continue }
                return  // shut down (EINVAL) or closed
            }
            // accept4(SOCK_CLOEXEC) is not exported to Swift; the connection lives for one request anyway.
            _ = fcntl(client, F_SETFD, FD_CLOEXEC)
            workers.submit(client)
        }
    }

    private func handle(_ client: Int32) {
        let deadline = DispatchTime.now().uptimeNanoseconds + Self.connectionDeadlineNanos
        // Each recv/send waits at most what is left of the deadline (checked between calls too).
        func armTimeout() -> Bool {
            let now = DispatchTime.now().uptimeNanoseconds
            guard now < deadline else { return false }
            let left = deadline - now
            var timeout = timeval(tv_sec: Int(left / 1_000_000_000), tv_usec: Int(left % 1_000_000_000 / 1000) + 1)
            setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            setsockopt(client, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            return true
        }
        var request: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 2048)
        // Read the request head: up to the blank line, at most 8 KiB.
        while request.count < 8192, !Self.hasHeadEnd(request), armTimeout() {
            let n = buffer.withUnsafeMutableBytes { recv(client, $0.baseAddress, $0.count, 0) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { break }
            request += buffer[0..<n]
        }
        let requestLine = String(
            decoding: request.prefix { $0 != UInt8(ascii: "\r") && $0 != UInt8(ascii: "\n") }, as: UTF8.self)
        let parts = requestLine.split(separator: " ")
        let response: String
        if parts.count >= 2, parts[0] == "GET" || parts[0] == "HEAD",
            parts[1] == "/metrics" || parts[1].hasPrefix("/metrics?")
        {
            let body = render()
            response = Self.response(
                "200 OK", "text/plain; version=0.0.4; charset=utf-8", parts[0] == "HEAD" ? nil : body,
                length: body.utf8.count)
        } else if parts.count >= 2, parts[0] == "GET" || parts[0] == "HEAD" {
            let body = "not found: scrape /metrics\n"
            response = Self.response("404 Not Found", "text/plain; charset=utf-8", body, length: body.utf8.count)
        } else {
            let body = "bad request\n"
            response = Self.response("400 Bad Request", "text/plain; charset=utf-8", body, length: body.utf8.count)
        }
        var bytes = Array(response.utf8)[...]
        while !bytes.isEmpty, armTimeout() {
            let n = bytes.withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return }
            bytes = bytes.dropFirst(n)
        }
    }

    private static func response(_ status: String, _ type: String, _ body: String?, length: Int) -> String {
        "HTTP/1.0 \(status)\r\nContent-Type: \(type)\r\nContent-Length: \(length)\r\nConnection: close\r\n\r\n"
            + (body ?? "")
    }

    private static func hasHeadEnd(_ bytes: [UInt8]) -> Bool {
        guard bytes.count >= 4 else { return false }
        for i in 0...(bytes.count - 4)
        where bytes[i] == 13 && bytes[i + 1] == 10 && bytes[i + 2] == 13 && bytes[i + 3] == 10 {
            return true
        }
        // Tolerate bare-LF clients (`printf 'GET /metrics\n\n' | nc`).
        for i in 0...(bytes.count - 2) where bytes[i] == 10 && bytes[i + 1] == 10 { return true }
        return false
    }

    // MARK: Addresses

    /// `HOST:PORT`, `:PORT` (loopback) or `localhost:PORT` → (IPv4 host, port).
    static func parse(_ address: String) throws(StallWatchError) -> (String, UInt16) {
        guard let colon = address.lastIndex(of: ":"), let port = UInt16(address[address.index(after: colon)...]) else {
            throw StallWatchError(
                .invalidConfiguration, "metrics address \(address): expected HOST:PORT, for example 127.0.0.1:9464")
        }
        var host = String(address[..<colon])
        if host.isEmpty || host == "localhost" { host = "127.0.0.1" }
        return (host, port)
    }

    private static func withSockaddr<R>(
        _ sin: inout sockaddr_in, _ body: (UnsafeMutablePointer<sockaddr>, socklen_t) throws(StallWatchError) -> R
    ) throws(StallWatchError) -> R {
        let length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let result = withUnsafeMutablePointer(to: &sin) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw in
                Result { () throws(StallWatchError) -> R in try body(raw, length) }
            }
        }
        return try result.get()
    }
}
