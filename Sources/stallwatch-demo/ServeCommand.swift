// `stallwatch-demo serve`: the chat-sessions service on a StallWatch loop with the watchdog embedded.
import Foundation
import StallWatch

#if canImport(Glibc)
    import Glibc
#endif

let serveUsage = """
    usage: stallwatch-demo serve [--port N] [--fixed] [--sessions N] [--threshold-ms N] [--report-dir DIR]

    Serves the chat-sessions demo on 127.0.0.1 (port 0, the default, picks a free one) from a StallWatch loop on
    the main thread with the watchdog embedded. The first stdout line is {"event":"listening","port":N,...};
    then one JSON line per stall event. Without --fixed each message does its heavy work on the loop; with
    --fixed the same work goes through StallWatchRemedies. --sessions (default 20000) sizes the session list.
      GET  /health                        readiness
      GET  /sessions?q=TEXT&limit=N       the sorted, filtered session list (JSON)
      POST /sessions/ID/messages          post a message (the body)
      POST /sessions/ID/pin               toggle a session's pin
      POST /stall/KIND?ms=N               inject a stall: io, sort, lock, deadlock, reentrant (default 600 ms)
      GET  /stats                         counters
      POST /quit                          stop (as do SIGTERM and SIGINT)
    """

struct ServeCommand {
    var port = 0
    var fixed = false
    var sessions = 20_000
    var configuration: StallWatchConfiguration

    init(arguments: [String]) {
        configuration = loadConfiguration()
        var args = CommandArguments(arguments, usage: serveUsage)
        while let arg = args.next() {
            switch arg {
            case "--port": port = args.number(arg, 0...65535)
            case "--fixed": fixed = true
            case "--sessions": sessions = args.number(arg, 1...2_000_000)
            case "--threshold-ms": args.override(&configuration, "thresholdMs", flag: arg)
            case "--report-dir": args.override(&configuration, "reportDirectory", flag: arg)
            case "-h", "--help":
                print(serveUsage)
                exit(0)
            default: fail("unknown argument \(arg)\n\(serveUsage)")
            }
        }
    }

    func run() -> Never {
        signal(SIGPIPE, SIG_IGN)
        let loop: EventLoop
        do {
            loop = try EventLoop(name: "chat")
        } catch {
            fail(error.message, code: 1)
        }
        // Before any other thread starts, so every thread inherits the blocked mask (see addSignalSource).
        let signalSources = [SIGTERM, SIGINT].map { loop.addSignalSource(signal: $0) { loop.stop() } }
        // A process started from a thread that blocks signals (a test runner's worker, a Dispatch thread)
        // inherits that mask; the loop thread must take the sampling signal or every capture times out.
        _ = try? SignalSampler.shared().registerCurrentThread()

        var template = Array((NSTemporaryDirectory() + "stallwatch-chat.XXXXXX").utf8CString)
        guard
            let dataDirectory = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) })
                .map({ String(cString: $0) })
        else { fail("mkdtemp: \(String(cString: strerror(errno)))", code: 1) }

        let service: ChatService
        let server: HTTPServer
        do {
            service = try ChatService(loop: loop, fixed: fixed, sessions: sessions, dataDirectory: dataDirectory)
            server = try HTTPServer(loop: loop, port: port) { request, responder in
                service.handle(request, responder)
            }
        } catch {
            fail("\(error)", code: 1)
        }
        service.onQuit = { loop.stop() }
        let notifications = ServiceNotifications()
        let watchdog = Watchdog(loop: loop, configuration: configuration) { event in
            EventPrinter.print(event)
            notifications.observe(event)
        }
        do {
            try watchdog.start()
        } catch {
            fail(error.message, code: 1)
        }
        printLine([
            "event": "listening", "port": server.port, "pid": Int(getpid()), "mode": service.mode,
            "sessions": sessions, "thresholdMs": configuration.thresholdMs, "reportDirectory": watchdog.reportDirectory,
        ])
        notifications.serving(port: server.port, mode: service.mode, watchdog: watchdog)
        loop.run()

        notifications.stopping()
        server.stop()
        for source in signalSources { source.cancel() }
        watchdog.stop()
        service.stop()
        try? FileManager.default.removeItem(atPath: dataDirectory)
        printLine([
            "event": "stopped", "mode": service.mode, "requests": service.requests, "messages": service.messages,
        ])
        exit(0)
    }
}

/// Writes one JSON object as a line on stdout, unbuffered.
func printLine(_ object: [String: Any]) {
    if let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) {
        FileHandle.standardOutput.write(data + Data("\n".utf8))
    }
}
