// OTLPHTTPClient: one blocking HTTP/1.1 POST over a plain TCP socket, with timeouts, for the OTLP exporter.
#if canImport(Glibc)
    import Glibc
#endif

/// Posts JSON to an `http://host[:port][/path]` endpoint. Blocking, with 5 s connect/send/receive timeouts;
/// run only on the exporter's own thread. TLS is not spoken: point it at a local OpenTelemetry collector.
struct OTLPHTTPClient: Sendable {
    let host: String
    let port: UInt16
    /// The request path: the endpoint's path + `/v1/logs`.
    let path: String

    /// Parses `http://host[:port][/base]`; nil for another scheme or a malformed URL.
    init?(endpoint: String, signalPath: String = "/v1/logs") {
        guard endpoint.hasPrefix("http://") else { return nil }
        let rest = endpoint.dropFirst("http://".count)
        let authority = rest.prefix { $0 != "/" }
        var base = String(rest.dropFirst(authority.count))
        while base.hasSuffix("/") { base.removeLast() }
        let parts = authority.split(separator: ":", omittingEmptySubsequences: false)
        guard let name = parts.first, !name.isEmpty, parts.count <= 2 else { return nil }
        host = String(name)
        if parts.count == 2 {
            guard let number = UInt16(parts[1]) else { return nil }
            port = number
        } else {
            port = 80
        }
        path = base + signalPath
    }

    /// The HTTP status of `POST path` with `body`, or nil when no answer came (refused, timed out, reset).
    func post(_ body: String) -> Int? {
        guard let fd = connectSocket() else { return nil }
        defer { close(fd) }
        let bytes = Array(body.utf8)
        let head =
            "POST \(path) HTTP/1.1\r\nHost: \(host):\(port)\r\nContent-Type: application/json\r\n"
            + "Content-Length: \(bytes.count)\r\nConnection: close\r\n\r\n"
        guard sendAll(fd, Array(head.utf8) + bytes) else { return nil }
        var response: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 1024)
        while !response.contains(UInt8(ascii: "\n")) && response.count < 8192 {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { break }
            response += buffer[0..<n]
        }
        // "HTTP/1.1 200 OK"
        let line = String(decoding: response.prefix { $0 != UInt8(ascii: "\r") }, as: UTF8.self)
        let fields = line.split(separator: " ")
        guard fields.count >= 2, fields[0].hasPrefix("HTTP/") else { return nil }
        return Int(fields[1])
    }

    private func connectSocket() -> Int32? {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, String(port), &hints, &list) == 0, let list else { return nil }
        defer { freeaddrinfo(list) }
        var entry: UnsafeMutablePointer<addrinfo>? = list
        while let current = entry {
            let info = current.pointee
            let fd = socket(info.ai_family, info.ai_socktype | Int32(SOCK_CLOEXEC.rawValue), info.ai_protocol)
            if fd >= 0 {
                var timeout = timeval(tv_sec: 5, tv_usec: 0)
                // On Linux SO_SNDTIMEO bounds connect too.
                setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
                setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
                if connect(fd, info.ai_addr, info.ai_addrlen) == 0 { return fd }
                close(fd)
            }
            entry = info.ai_next
        }
        return nil
    }

    private func sendAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        var rest = bytes[...]
        while !rest.isEmpty {
            let n = rest.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return false }
            rest = rest.dropFirst(n)
        }
        return true
    }
}
