// A small HTTP/1.1 server on the StallWatch EventLoop: non-blocking sockets, keep-alive, one request at a time.
import Foundation
import StallWatch

#if canImport(Glibc)
    import Glibc
#endif

/// One parsed request.
struct HTTPRequest: Sendable {
    var method: String
    /// The path without the query (`/sessions/7/messages`).
    var path: String
    var query: [String: String]
    var headers: [String: String]
    var body: [UInt8]

    var pathComponents: [Substring] { path.split(separator: "/") }
}

/// A response to write.
struct HTTPResponse: Sendable {
    var status: Int
    var body: String
    var contentType = "text/plain; charset=utf-8"

    static func text(_ body: String, status: Int = 200) -> HTTPResponse { HTTPResponse(status: status, body: body) }

    static func json(_ body: String, status: Int = 200) -> HTTPResponse {
        HTTPResponse(status: status, body: body, contentType: "application/json")
    }

    static func notFound(_ what: String) -> HTTPResponse { .text("not found: \(what)\n", status: 404) }

    static func badRequest(_ why: String) -> HTTPResponse { .text("bad request: \(why)\n", status: 400) }

    var reason: String {
        switch status {
        case 200: "OK"
        case 202: "Accepted"
        case 400: "Bad Request"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 413: "Payload Too Large"
        case 500: "Internal Server Error"
        case 503: "Service Unavailable"
        default: "Status"
        }
    }
}

/// Answers one request; call it exactly once, on the loop thread, now or later.
struct HTTPResponder: Sendable {
    fileprivate let connection: HTTPConnection
    func respond(_ response: HTTPResponse) { connection.respond(response) }
}

/// A listening socket on 127.0.0.1 whose connections are served on an ``EventLoop``.
///
/// Everything but ``init(loop:port:handler:)`` and ``stop()`` runs on the loop thread: accept and read events
/// arrive as read sources, responses go out with a direct `send` and, if the socket buffer is full, a write
/// source until drained. Requests on one connection are handled one at a time, in order.
final class HTTPServer: @unchecked Sendable {  // loop-confined after init
    typealias Handler = @Sendable (HTTPRequest, HTTPResponder) -> Void

    let loop: EventLoop
    let port: Int
    private let listenFD: Int32
    private let handler: Handler
    private var acceptSource: LoopSource?
    private var connections: [ObjectIdentifier: HTTPConnection] = [:]

    /// Binds 127.0.0.1:`port` (0: any free port; read ``port``) and starts accepting on the loop.
    init(loop: EventLoop, port: Int, handler: @escaping Handler) throws {
        self.loop = loop
        self.handler = handler
        let (fd, bound) = try LoopbackSocket.listen(port: port)
        self.port = bound
        self.listenFD = fd
        acceptSource = loop.addReadSource(fileDescriptor: fd) { [self] in acceptConnections() }
    }

    /// Stops accepting and closes every connection. Loop thread.
    func stop() {
        acceptSource?.cancel()
        acceptSource = nil
        for connection in connections.values { connection.close() }
        connections.removeAll()
        HTTPConnection.closeLater(listenFD, on: loop)
    }

    private func acceptConnections() {
        while true {
            // accept4 is a GNU extension the Glibc module does not export: accept, then set the flags.
            let fd = accept(listenFD, nil, nil)
            if fd < 0 {
                if errno == EINTR { continue }
                return  // EAGAIN: all accepted (or a transient error: the next event retries)
            }
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            var one: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            let connection = HTTPConnection(fd: fd, loop: loop, handler: handler) { [self] closed in
                connections[ObjectIdentifier(closed)] = nil
            }
            connections[ObjectIdentifier(connection)] = connection
            connection.start()
        }
    }
}

/// One client connection. Loop thread only.
final class HTTPConnection: @unchecked Sendable {
    // @unchecked Sendable: Loop-confined: created, used and closed on the loop thread only.
    private let fd: Int32
    private let loop: EventLoop
    private let handler: HTTPServer.Handler
    private let onClose: (HTTPConnection) -> Void
    private var readSource: LoopSource?
    private var writeSource: LoopSource?
    private var input: [UInt8] = []
    private var readBuffer = [UInt8](repeating: 0, count: 16 << 10)
    private var output: [UInt8] = []
    private var outputSent = 0
    private var awaitingResponse = false
    private var closeAfterWrite = false
    private var closed = false

    static let maxHeaderBytes = 16 << 10
    static let maxBodyBytes = 1 << 20

    init(fd: Int32, loop: EventLoop, handler: @escaping HTTPServer.Handler, onClose: @escaping (HTTPConnection) -> Void)
    {
        self.fd = fd
        self.loop = loop
        self.handler = handler
        self.onClose = onClose
    }

    func start() {
        readSource = loop.addReadSource(fileDescriptor: fd) { [self] in readAvailable() }
    }

    private func readAvailable() {
        guard !closed else { return }
        while true {
            let n = readBuffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n > 0 {
                input.append(contentsOf: readBuffer[0..<n])
                if n < readBuffer.count { break }
                continue
            }
            if n == 0 {
                // The peer closed its side: finish what is being answered, then close.
                if awaitingResponse || outputSent < output.count { closeAfterWrite = true } else { close() }
                readSource?.cancel()
                readSource = nil
                return
            }
            if errno == EINTR { continue }
            if errno == EAGAIN || errno == EWOULDBLOCK { break }
            close()
            return
        }
        handleNextRequest()
    }

    /// Parses and dispatches the next complete request in the buffer, if no response is pending.
    private func handleNextRequest() {
        guard !closed, !awaitingResponse, outputSent == output.count else { return }
        switch HTTPParser.parse(&input) {
        case .incomplete:
            if input.count > Self.maxHeaderBytes + Self.maxBodyBytes { fail(413) }
        case .invalid(let status):
            fail(status)
        case .request(let request, let keepAlive):
            awaitingResponse = true
            if !keepAlive { closeAfterWrite = true }
            handler(request, HTTPResponder(connection: self))
        }
    }

    private func fail(_ status: Int) {
        closeAfterWrite = true
        awaitingResponse = true
        respond(HTTPResponse(status: status, body: "bad request\n"))
    }

    /// Queues the response for the request being handled and sends what the socket takes now.
    func respond(_ response: HTTPResponse) {
        guard !closed, awaitingResponse else { return }
        awaitingResponse = false
        let body = Array(response.body.utf8)
        var head = "HTTP/1.1 \(response.status) \(response.reason)\r\n"
        head += "Content-Type: \(response.contentType)\r\nContent-Length: \(body.count)\r\n"
        head += closeAfterWrite ? "Connection: close\r\n\r\n" : "Connection: keep-alive\r\n\r\n"
        output = Array(head.utf8) + body
        outputSent = 0
        flush()
    }

    private func flush() {
        while outputSent < output.count {
            let n = output[outputSent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n > 0 {
                outputSent += n
                continue
            }
            if n < 0 && errno == EINTR { continue }
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                if writeSource == nil { writeSource = loop.addWriteSource(fileDescriptor: fd) { [self] in flush() } }
                return
            }
            close()
            return
        }
        writeSource?.cancel()
        writeSource = nil
        output.removeAll(keepingCapacity: true)
        outputSent = 0
        if closeAfterWrite {
            close()
        } else {
            handleNextRequest()  // a pipelined request may already be buffered
        }
    }

    func close() {
        guard !closed else { return }
        closed = true
        readSource?.cancel()
        writeSource?.cancel()
        readSource = nil
        writeSource = nil
        shutdown(fd, Int32(SHUT_RDWR))
        Self.closeLater(fd, on: loop)
        onClose(self)
    }

    /// Closes `fd` a little later: a cancelled Dispatch source unregisters asynchronously, and a descriptor number
    /// reused by the next accept before that would lose its own registration.
    static func closeLater(_ fd: Int32, on loop: EventLoop) {
        loop.schedule(after: .milliseconds(200)) { _ = Glibc.close(fd) }
    }
}

/// Splits complete HTTP/1.1 requests off the front of a byte buffer.
enum HTTPParser {
    enum Result {
        case incomplete
        case invalid(status: Int)
        case request(HTTPRequest, keepAlive: Bool)
    }

    static func parse(_ buffer: inout [UInt8]) -> Result {
        guard let headerEnd = findHeaderEnd(buffer) else {
            return buffer.count > HTTPConnection.maxHeaderBytes ? .invalid(status: 413) : .incomplete
        }
        let head = String(decoding: buffer[0..<headerEnd], as: UTF8.self)
        var lines = head.split(separator: "\r\n", omittingEmptySubsequences: false)[...]
        guard let requestLine = lines.popFirst() else { return .invalid(status: 400) }
        let parts = requestLine.split(separator: " ")
        guard parts.count == 3, parts[2].hasPrefix("HTTP/1.") else { return .invalid(status: 400) }
        var headers: [String: String] = [:]
        for line in lines where !line.isEmpty {
            guard let colon = line.firstIndex(of: ":") else { return .invalid(status: 400) }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(
                in: .whitespaces)
        }
        let length = Int(headers["content-length"] ?? "0") ?? -1
        guard length >= 0 else { return .invalid(status: 400) }
        guard length <= HTTPConnection.maxBodyBytes else { return .invalid(status: 413) }
        let bodyStart = headerEnd + 4
        guard buffer.count >= bodyStart + length else { return .incomplete }
        let body = Array(buffer[bodyStart..<(bodyStart + length)])
        buffer.removeFirst(bodyStart + length)

        let target = String(parts[1])
        let (path, queryText) =
            target.firstIndex(of: "?").map { (String(target[..<$0]), String(target[target.index(after: $0)...])) }
            ?? (target, "")
        var query: [String: String] = [:]
        for pair in queryText.split(separator: "&") {
            let kv = pair.split(separator: "=", maxSplits: 1)
            let key = String(kv[0]).removingPercentEncoding ?? String(kv[0])
            query[key] = kv.count > 1 ? (String(kv[1]).removingPercentEncoding ?? String(kv[1])) : ""
        }
        let connection = headers["connection"]?.lowercased()
        let keepAlive = parts[2] == "HTTP/1.1" ? connection != "close" : connection == "keep-alive"
        let request = HTTPRequest(method: String(parts[0]), path: path, query: query, headers: headers, body: body)
        return .request(request, keepAlive: keepAlive)
    }

    private static func findHeaderEnd(_ buffer: [UInt8]) -> Int? {
        guard buffer.count >= 4 else { return nil }
        for i in 0...(buffer.count - 4)
        where buffer[i] == 13 && buffer[i + 1] == 10 && buffer[i + 2] == 13 && buffer[i + 3] == 10 {
            return i
        }
        return nil
    }
}

/// A demo failure with a message for stderr.
struct DemoError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
