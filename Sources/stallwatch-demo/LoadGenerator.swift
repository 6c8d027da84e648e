// `stallwatch-demo load`: a bounded loopback load for the chat service, with latency percentiles.
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

let loadUsage = """
    usage: stallwatch-demo load [--port N] [--seconds N] [--rate N] [--connections N] [--sessions N]
                                [--stall KIND...] [--stall-ms N] [--quit]

    Drives the chat service on 127.0.0.1:PORT for --seconds (default 5) at --rate requests per second in total
    (default 200) over --connections keep-alive connections (default 8): 80% message posts to random sessions
    among the first --sessions (default 20000), 20% session-list reads. --stall KIND... (io, sort, lock, deadlock,
    reentrant; comma- or space-separated) injects each kind once, evenly spread over the run, for --stall-ms
    (default 600) on a separate connection, each at least 300 ms after the previous one was answered (one stall
    at a time). --quit posts /quit at the end. Prints a summary, then one JSON line {"event":"summary",...} with
    requests, errors and latency percentiles (stall requests counted apart): of every request, of the reads alone
    (readP99Ms: the loop answers them from memory) and of the posts alone (postP99Ms: each is answered once its
    journal line is on disk, so the disk's speed is part of it).
    """

struct LoadCommand {
    var port = 0
    var seconds = 5
    var rate = 200
    var connections = 8
    var sessions = 20_000
    var stalls: [ServiceStallKind] = []
    var stallMs = 600
    var quit = false

    init(arguments: [String]) {
        var args = CommandArguments(arguments, usage: loadUsage)
        while let arg = args.next() {
            switch arg {
            case "--port": port = args.number(arg, 1...65535)
            case "--seconds": seconds = args.number(arg, 1...600)
            case "--rate": rate = args.number(arg, 1...100_000)
            case "--connections": connections = args.number(arg, 1...256)
            case "--sessions": sessions = args.number(arg, 1...2_000_000)
            case "--stall-ms": stallMs = args.number(arg, 1...60_000)
            case "--quit": quit = true
            case "--stall":
                for text in args.values(arg).flatMap({ $0.split(separator: ",") }) {
                    guard let kind = ServiceStallKind(rawValue: String(text)) else {
                        let kinds = ServiceStallKind.allCases.map(\.rawValue).joined(separator: ", ")
                        fail("--stall \(text): expected one of \(kinds)")
                    }
                    stalls.append(kind)
                }
            case "-h", "--help":
                print(loadUsage)
                exit(0)
            default: fail("unknown argument \(arg)\n\(loadUsage)")
            }
        }
        if port == 0 { fail("--port is required\n\(loadUsage)") }
    }

    func run() -> Never {
        signal(SIGPIPE, SIG_IGN)
        let result = LoadGenerator(command: self).run()
        let latencies = result.latenciesMs
        let p50 = Self.percentile(latencies, 0.50), p99 = Self.percentile(latencies, 0.99)
        let readP99 = Self.percentile(result.readLatenciesMs, 0.99)
        let postP99 = Self.percentile(result.postLatenciesMs, 0.99)
        let max = latencies.max() ?? 0
        print(
            String(
                format: "load: %d requests in %.1f s (%d errors), latency p50 %.1f ms, p99 %.1f ms, max %.1f ms"
                    + " (p99 of reads %.1f ms, of posts %.1f ms)",
                latencies.count + result.errors, result.elapsedSeconds, result.errors, p50, p99, max, readP99,
                postP99))
        for stall in result.stalls {
            print(
                String(
                    format: "load: stall %@ answered in %.0f ms%@", stall.kind, stall.latencyMs,
                    stall.ok ? "" : " (failed)"))
        }
        let rounded = { (x: Double) in (x * 100).rounded() / 100 }
        printLine([
            "event": "summary", "requests": latencies.count + result.errors, "ok": latencies.count,
            "errors": result.errors, "p50Ms": rounded(p50), "p99Ms": rounded(p99), "maxMs": rounded(max),
            "readP99Ms": rounded(readP99), "postP99Ms": rounded(postP99),
            "seconds": rounded(result.elapsedSeconds),
            "stalls": result.stalls.map { ["kind": $0.kind, "latencyMs": rounded($0.latencyMs), "ok": $0.ok] },
        ])
        exit(latencies.isEmpty ? 1 : 0)
    }

    /// The `p` quantile of `values` (nearest rank); 0 for none.
    static func percentile(_ values: [Double], _ p: Double) -> Double {
        guard !values.isEmpty else { return 0 }
        let sorted = values.sorted()
        return sorted[min(sorted.count - 1, Int((Double(sorted.count) * p).rounded(.up)) - 1)]
    }
}

/// Runs the load: one thread per connection with blocking sockets, paced to the rate, bounded in time.
struct LoadGenerator {
    struct StallResult {
        var kind: String
        var latencyMs: Double
        var ok: Bool
    }

    struct Result {
        /// Session-list reads, answered by the loop from memory.
        var readLatenciesMs: [Double]
        /// Message posts, answered once the message's journal line is on disk.
        var postLatenciesMs: [Double]
        var errors: Int
        var stalls: [StallResult]
        var elapsedSeconds: Double

        var latenciesMs: [Double] { readLatenciesMs + postLatenciesMs }
    }

    let command: LoadCommand

    func run() -> Result {
        let collected = Mutex((reads: [Double](), posts: [Double](), errors: 0, stalls: [StallResult]()))
        let start = Self.now()
        let end = start + UInt64(command.seconds) * 1_000_000_000
        let interval = UInt64(Double(command.connections) / Double(command.rate) * 1e9)
        let group = DispatchGroup()
        let command = command
        for index in 0..<command.connections {
            group.enter()
            let thread = Thread {
                defer { group.leave() }
                var client = HTTPClient(port: command.port)
                var rng = SystemRandomNumberGenerator()
                var due = start + UInt64(index) * interval / UInt64(command.connections)
                var reads: [Double] = []
                var posts: [Double] = []
                var errors = 0
                while due < end {
                    Self.sleep(until: due)
                    due += interval
                    let request: String
                    let post = Int.random(in: 0..<10, using: &rng) < 8
                    if post {
                        let id = Int.random(in: 0..<command.sessions, using: &rng)
                        request = HTTPClient.request(
                            "POST", "/sessions/\(id)/messages", body: "hello from connection \(index)")
                    } else {
                        request = HTTPClient.request("GET", "/sessions?limit=20", body: nil)
                    }
                    let sent = Self.now()
                    if client.exchange(request) == 200 {
                        let ms = Double(Self.now() - sent) / 1e6
                        if post { posts.append(ms) } else { reads.append(ms) }
                    } else {
                        errors += 1
                        client.reset()
                    }
                }
                collected.withLock {
                    $0.reads += reads
                    $0.posts += posts
                    $0.errors += errors
                }
            }
            thread.name = "load-\(index)"
            thread.start()
        }
        // One stall at a time: a stall sent while the previous one is still being served (a slow machine) would be
        // served right after it with no progress of the loop in between, one stall of two kinds.
        if !command.stalls.isEmpty {
            group.enter()
            let thread = Thread {
                defer { group.leave() }
                var earliest: UInt64 = 0
                for (index, kind) in command.stalls.enumerated() {
                    let count = UInt64(command.stalls.count + 1)
                    Self.sleep(
                        until: max(
                            earliest, start + UInt64(command.seconds) * 1_000_000_000 * UInt64(index + 1) / count))
                    var client = HTTPClient(port: command.port, timeoutSeconds: 60)
                    let sent = Self.now()
                    let status = client.exchange(
                        HTTPClient.request("POST", "/stall/\(kind.rawValue)?ms=\(command.stallMs)", body: nil))
                    let result = StallResult(
                        kind: kind.rawValue, latencyMs: Double(Self.now() - sent) / 1e6, ok: status == 200)
                    collected.withLock { $0.stalls.append(result) }
                    earliest = Self.now() + Self.stallGapNanos
                }
            }
            thread.name = "load-stalls"
            thread.start()
        }
        group.wait()
        let elapsed = Double(Self.now() - start) / 1e9
        if command.quit {
            var client = HTTPClient(port: command.port)
            _ = client.exchange(HTTPClient.request("POST", "/quit", body: nil))
        }
        return collected.withLock { c in
            Result(
                readLatenciesMs: c.reads, postLatenciesMs: c.posts, errors: c.errors,
                stalls: c.stalls.sorted { $0.kind < $1.kind },
                elapsedSeconds: elapsed)
        }
    }

    static func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

    /// How long after an injected stall was answered the next may be sent: the loop serves the other connections
    /// meanwhile, so each stall ends before the next begins.
    static let stallGapNanos: UInt64 = 300_000_000

    static func sleep(until deadline: UInt64) {
        let now = now()
        guard deadline > now else { return }
        let nanos = Int(deadline - now)
        var request = timespec(tv_sec: nanos / 1_000_000_000, tv_nsec: nanos % 1_000_000_000)
        var remaining = timespec()
        while nanosleep(&request, &remaining) == -1 && errno == EINTR { request = remaining }
    }
}

/// A blocking keep-alive HTTP/1.1 client connection to 127.0.0.1, reconnecting on demand.
struct HTTPClient {
    let port: Int
    let timeoutSeconds: Int
    private var fd: Int32 = -1
    private var buffer: [UInt8] = []

    init(port: Int, timeoutSeconds: Int = 10) {
        self.port = port
        self.timeoutSeconds = timeoutSeconds
    }

    static func request(_ method: String, _ path: String, body: String?) -> String {
        let body = body ?? ""
        return "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)"
    }

    /// Sends `request` and reads the response; returns its status, or nil on any failure.
    mutating func exchange(_ request: String) -> Int? {
        if fd < 0, !connect() { return nil }
        var bytes = Array(request.utf8)[...]
        while !bytes.isEmpty {
            let n = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return nil }
            bytes = bytes.dropFirst(n)
        }
        return readResponse()
    }

    mutating func reset() {
        if fd >= 0 { close(fd) }
        fd = -1
        buffer.removeAll()
    }

    private mutating func connect() -> Bool {
        guard let connected = LoopbackSocket.connect(port: port, timeoutSeconds: timeoutSeconds) else {
            reset()
            return false
        }
        fd = connected
        return true
    }

    private mutating func readResponse() -> Int? {
        var chunk = [UInt8](repeating: 0, count: 16 << 10)
        while true {
            if let (status, length, closeAfter) = parse() {
                buffer.removeFirst(length)
                if closeAfter { reset() }
                return status
            }
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 {
                reset()
                return nil
            }
            buffer.append(contentsOf: chunk[0..<n])
        }
    }

    /// A complete response at the front of the buffer: its status, total length, and whether the server closes.
    private func parse() -> (Int, Int, Bool)? {
        guard buffer.count >= 4 else { return nil }
        guard
            let end = (0...(buffer.count - 4)).first(where: {
                buffer[$0] == 13 && buffer[$0 + 1] == 10 && buffer[$0 + 2] == 13 && buffer[$0 + 3] == 10
            })
        else { return nil }
        let head = String(decoding: buffer[0..<end], as: UTF8.self).lowercased()
        let lines = head.split(separator: "\r\n")
        guard let statusLine = lines.first, statusLine.split(separator: " ").count >= 2,
            let status = Int(statusLine.split(separator: " ")[1])
        else { return nil }
        var length = 0
        var closeAfter = false
        for line in lines.dropFirst() {
            if line.hasPrefix("content-length:") {
                length = Int(line.dropFirst(15).trimmingCharacters(in: .whitespaces)) ?? 0
            }
            if line.hasPrefix("connection:") && line.contains("close") { closeAfter = true }
        }
        guard buffer.count >= end + 4 + length else { return nil }
        return (status, end + 4 + length, closeAfter)
    }
}
