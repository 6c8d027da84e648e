// An OTLP/HTTP logs receiver on loopback for tests: Python's http.server parsing every post with the official
// opentelemetry-proto definitions (PyPI), one JSON line per log record on stdout.
import Foundation
import StallWatchTestSupport
import Synchronization
import Testing

/// The receiver process; killed on teardown. `failFirst` posts are answered 503 (to exercise retries).
final class OTLPReceiver: @unchecked Sendable {
    // @unchecked Sendable: `records` is guarded by `lock`; the rest is set once in init.
    let process = Process()
    let port: Int
    private let lock = NSLock()
    private var lines: [String] = []
    private let arrived = DispatchSemaphore(value: 0)
    private let directory: String

    static let script = """
        import json, sys
        from http.server import BaseHTTPRequestHandler, HTTPServer
        from google.protobuf import json_format
        from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

        fail_first = int(sys.argv[1])
        posts = 0

        def value(v):
            kind = v.WhichOneof("value")
            return getattr(v, kind) if kind else None

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                global posts
                posts += 1
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if posts <= fail_first or self.path != "/v1/logs":
                    self.send_response(503 if self.path == "/v1/logs" else 404)
                    self.end_headers()
                    return
                request = json_format.Parse(body, ExportLogsServiceRequest())
                for resource_logs in request.resource_logs:
                    resource = {a.key: value(a.value) for a in resource_logs.resource.attributes}
                    for scope_logs in resource_logs.scope_logs:
                        for record in scope_logs.log_records:
                            attributes = {a.key: value(a.value) for a in record.attributes}
                            print(json.dumps({"post": posts, "resource": resource, "attributes": attributes,
                                "severity": record.severity_number, "body": record.body.string_value,
                                "time": record.time_unix_nano, "scope": scope_logs.scope.name}), flush=True)
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

        server = HTTPServer(("127.0.0.1", 0), Handler)
        print(server.server_address[1], flush=True)
        server.serve_forever()
        """

    /// What a test says when the receiver cannot run.
    static let missing: Comment =
        "python3 cannot import opentelemetry.proto (the PyPI package opentelemetry-proto, scripts/bootstrap.sh)"

    static let available: Bool = {
        (try? Fixtures.run(
            "/usr/bin/env", ["python3", "-c", "import opentelemetry.proto.collector.logs.v1.logs_service_pb2"],
            timeout: .seconds(30)
        ).status) == 0
    }()

    init(failFirst: Int = 0) throws {
        directory = Fixtures.temporaryDirectory("otlp")
        try Self.script.write(toFile: directory + "/receiver.py", atomically: true, encoding: .utf8)
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", directory + "/receiver.py", String(failFirst)]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.standardError
        try process.run()
        let reader = output.fileHandleForReading
        var buffer = Data()
        while !buffer.contains(UInt8(ascii: "\n")) {
            let chunk = reader.availableData
            if chunk.isEmpty { break }
            buffer.append(chunk)
        }
        let first = buffer.prefix { $0 != UInt8(ascii: "\n") }
        guard let port = Int(String(decoding: first, as: UTF8.self)) else {
            kill(process.processIdentifier, SIGKILL)
            throw CocoaError(.fileReadCorruptFile)
        }
        self.port = port
        let rest = Data(buffer.drop { $0 != UInt8(ascii: "\n") }.dropFirst())
        Thread.detachNewThread { [lock = self.lock, weak self] in
            var pending = rest
            while true {
                while let end = pending.firstIndex(of: UInt8(ascii: "\n")) {
                    let line = String(decoding: pending[pending.startIndex..<end], as: UTF8.self)
                    pending = Data(pending[pending.index(after: end)...])
                    guard let self else { return }
                    lock.withLock { self.lines.append(line) }
                    self.arrived.signal()
                }
                let chunk = reader.availableData
                if chunk.isEmpty { return }
                pending.append(chunk)
            }
        }
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        try? FileManager.default.removeItem(atPath: directory)
    }

    var endpoint: String { "http://127.0.0.1:\(port)" }

    /// The records parsed so far, as the receiver printed them.
    var records: [[String: Any]] {
        lock.withLock { lines }.compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
    }

    /// Waits (woken by each parsed record) until `count` records arrived; false after `timeout`.
    func wait(for count: Int, timeout: Duration = .seconds(30)) -> Bool {
        let deadline = DispatchTime.now() + .seconds(Int(timeout.components.seconds))
        while lock.withLock({ lines.count }) < count {
            if arrived.wait(timeout: deadline) == .timedOut { return lock.withLock { lines.count } >= count }
        }
        return true
    }
}
