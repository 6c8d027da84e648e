// `stallwatch-demo serve` and `stallwatch daemon` under a NOTIFY_SOCKET listener playing systemd, and the shipped
// units: READY once serving/watching, readable STATUS, WATCHDOG=1 only while healthy, a watchdog signal that ends
// a stuck Swift process.
import CStallWatchCore
import Foundation
import StallWatchTestSupport
import Synchronization
import Testing

@testable import StallWatch

#if canImport(Glibc)
    import Glibc
#endif

/// A child process started with extra environment, stdout piped; always killed on teardown.
final class NotifiedChild {
    let process = Process()
    private let output = Pipe()

    init(_ path: String, _ arguments: [String], environment extra: [String: String]) throws {
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        var environment = ProcessInfo.processInfo.environment
        for (key, value) in extra { environment[key] = value }
        process.environment = environment
        process.standardOutput = output
        process.standardError = FileHandle.standardError
        try process.run()
    }

    deinit { stop() }

    /// The first line of standard output (blocking until it is written or the process closes it).
    func firstLine() -> String {
        var line = Data()
        let reader = output.fileHandleForReading
        while !line.contains(UInt8(ascii: "\n")) {
            let chunk = reader.availableData
            if chunk.isEmpty { break }
            line.append(chunk)
        }
        return String(decoding: line.split(separator: UInt8(ascii: "\n")).first ?? Data(), as: UTF8.self)
    }

    func stop() {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }
}

@Suite(.offPool, .serialized) struct SystemdServiceTests {
    static func pings(_ messages: [DatagramListener.Message]) -> [UInt64] {
        messages.filter { $0.text == "WATCHDOG=1" }.map(\.receivedNanos)
    }

    static func firstTime(_ messages: [DatagramListener.Message], containing text: String) -> UInt64? {
        messages.first { $0.text.contains(text) }?.receivedNanos
    }

    /// Sends `POST path` to 127.0.0.1:port and leaves the connection open (the answer comes after the stall).
    static func post(port: Int, path: String) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        try #require(fd >= 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        try #require(connected == 0)
        let request = Array("POST \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n".utf8)
        try #require(write(fd, request, request.count) == request.count)
        return fd
    }

    @Test(.timeLimit(.minutes(3)))
    func serveIsReadyOncePingsWhileHealthyStopsDuringAStallAndResumes() throws {
        let directory = Fixtures.temporaryDirectory("sd-serve")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let listener = try DatagramListener(address: directory + "/notify.sock")
        listener.startCollecting()
        defer { listener.stopCollecting() }
        let serve = try NotifiedChild(
            Fixtures.executable("stallwatch-demo"),
            ["serve", "--port", "0", "--threshold-ms", "150", "--sessions", "100", "--report-dir", directory],
            environment: ["NOTIFY_SOCKET": directory + "/notify.sock", "WATCHDOG_USEC": "200000"])
        defer { serve.stop() }
        let listening = try #require(
            try JSONSerialization.jsonObject(with: Data(serve.firstLine().utf8)) as? [String: Any])
        let port = try #require(listening["port"] as? Int)

        #expect(
            listener.wait(timeout: .seconds(20)) { $0.contains { $0.text.hasPrefix("READY=1\nSTATUS=serving on") } })
        #expect(listener.wait(timeout: .seconds(20)) { Self.pings($0).count >= 3 }, "pings every 100 ms")

        let connection = try Self.post(port: port, path: "/stall/sort?ms=1200")
        defer { close(connection) }
        // The stall ends when the handler answers; the STATUS that says so follows once the final report is
        // built off the watching thread, and pings may rightly resume before it.
        let answered = Atomic<UInt64>(0)
        let reader = dup(connection)  // the reader's own: never a number the test closed and someone reused
        DispatchQueue.global().async {
            defer { close(reader) }
            var byte: UInt8 = 0
            if read(reader, &byte, 1) == 1 { answered.store(sw_monotonic_ns(), ordering: .releasing) }
        }
        #expect(listener.wait(timeout: .seconds(20)) { Self.firstTime($0, containing: "STATUS=serving; last") != nil })
        let messages = listener.messages
        let began = try #require(Self.firstTime(messages, containing: "STATUS=loop stalled"))
        let ended = try #require(Self.firstTime(messages, containing: "STATUS=serving; last stall"))
        #expect(ended > began + 500_000_000, "the stall lasted about a second")
        #expect(listener.wait(timeout: .seconds(20)) { Self.pings($0).filter { $0 > ended }.count >= 2 }, "resumed")
        // A ping sent just before the threshold was crossed may be read a little after the stall's STATUS.
        let answeredAt = answered.load(ordering: .acquiring)
        let stallEnd = answeredAt > 0 ? min(ended, answeredAt) : ended
        let during = Self.pings(listener.messages).filter { $0 > began + 30_000_000 && $0 < stallEnd }
        #expect(during.isEmpty, "\(during.count) WATCHDOG=1 while the loop was stalled")
        #expect(Self.pings(listener.messages).filter { $0 < began }.count >= 3)
    }

    @Test(.timeLimit(.minutes(3)))
    func theDaemonIsReadyAfterItsFirstScanAndItsStatusFollowsAWatchedStall() throws {
        let directory = Fixtures.temporaryDirectory("sd-daemon")
        let shm = Fixtures.temporaryDirectory("sd-daemon-shm")
        defer {
            try? FileManager.default.removeItem(atPath: directory)
            try? FileManager.default.removeItem(atPath: shm)
        }
        let listener = try DatagramListener(address: directory + "/notify.sock")
        listener.startCollecting()
        defer { listener.stopCollecting() }
        let daemon = try NotifiedChild(
            Fixtures.executable("stallwatch"),
            ["daemon", "--heartbeat-dir", shm, "--report-dir", directory + "/reports", "--scan-ms", "100"],
            environment: ["NOTIFY_SOCKET": directory + "/notify.sock", "WATCHDOG_USEC": "300000"])
        defer { daemon.stop() }
        #expect(
            listener.wait(timeout: .seconds(20)) {
                $0.contains { $0.text == "READY=1\nSTATUS=watching 0 processes in \(shm); 0 stalls reported" }
            })
        #expect(listener.wait(timeout: .seconds(20)) { Self.pings($0).count >= 3 }, "pings every 150 ms")

        let demo = try NotifiedChild(
            Fixtures.executable("stallwatch-demo"),
            [
                "stall", "--kind", "sleep", "--duration-ms", "900", "--threshold-ms", "200", "--delay-ms", "1200",
                "--no-watchdog", "--report-dir", directory + "/demo",
            ], environment: ["STALLWATCH_HEARTBEAT_DIRECTORY": shm])
        defer { demo.stop() }
        let pid = demo.process.processIdentifier
        #expect(
            listener.wait(timeout: .seconds(20)) { Self.firstTime($0, containing: "stalled now: pid \(pid)") != nil })
        #expect(listener.wait(timeout: .seconds(20)) { Self.firstTime($0, containing: "; 1 stall reported") != nil })
        let stalledAt = try #require(Self.firstTime(listener.messages, containing: "stalled now"))
        let endedAt = try #require(Self.firstTime(listener.messages, containing: "; 1 stall reported"))
        // The daemon's health is its own scan loop: a watched process's stall is reported, not a reason for
        // systemd to restart the daemon.
        let during = Self.pings(listener.messages).filter { $0 > stalledAt && $0 < endedAt }
        #expect(!during.isEmpty || endedAt - stalledAt < 300_000_000, "the daemon kept pinging while healthy")
    }

    /// `Fixtures/freeze_thread.c` of the sidecar tests, built once per test process.
    static let freezer: String? = {
        let out = Fixtures.temporaryDirectory("freeze-thread") + "/freeze_thread"
        let source = Fixtures.packageRoot.path + "/Tests/StallWatchSidecarTests/Fixtures/freeze_thread.c"
        guard let result = try? Fixtures.run("/bin/sh", ["-c", "cc -O1 -o '\(out)' '\(source)'"]) else { return nil }
        return result.status == 0 ? out : nil
    }()

    /// The daemon's own watcher stuck (one of its threads held in a ptrace stop while the rest of the daemon runs):
    /// nobody watches that process any more, so the pings stop until the watcher turns again.
    @Test(.timeLimit(.minutes(3)))
    func theDaemonStopsPingingWhileOneOfItsWatchersIsStuckAndResumes() throws {
        let freezer = try #require(Self.freezer, "cc could not build the freezer")
        let directory = Fixtures.temporaryDirectory("sd-stuck")
        let shm = Fixtures.temporaryDirectory("sd-stuck-shm")
        defer {
            try? FileManager.default.removeItem(atPath: directory)
            try? FileManager.default.removeItem(atPath: shm)
        }
        let listener = try DatagramListener(address: directory + "/notify.sock")
        listener.startCollecting()
        defer { listener.stopCollecting() }
        let daemon = try NotifiedChild(
            Fixtures.executable("stallwatch"),
            ["daemon", "--heartbeat-dir", shm, "--report-dir", directory + "/reports", "--scan-ms", "100"],
            environment: ["NOTIFY_SOCKET": directory + "/notify.sock", "WATCHDOG_USEC": "300000"])
        defer { daemon.stop() }
        let serve = try NotifiedChild(
            Fixtures.executable("stallwatch-demo"),
            [
                "serve", "--port", "0", "--threshold-ms", "200", "--sessions", "100", "--report-dir",
                directory + "/demo",
            ],
            environment: ["STALLWATCH_HEARTBEAT_DIRECTORY": shm])
        defer { serve.stop() }
        let pid = serve.process.processIdentifier
        #expect(listener.wait(timeout: .seconds(20)) { Self.firstTime($0, containing: "watching 1 process ") != nil })
        let daemonPID = daemon.process.processIdentifier
        var watcherThreads: [Int32] = []
        let found = listener.wait(timeout: .seconds(20)) { _ in
            watcherThreads = ThreadProbe.threadIDs(pid: daemonPID, nameMatching: "sw-watch-\(pid)")
            return !watcherThreads.isEmpty
        }
        let watcher = try #require(watcherThreads.first, "the daemon's watcher thread (found: \(found))")
        #expect(listener.wait(timeout: .seconds(20)) { Self.pings($0).count >= 3 }, "healthy: pings every 150 ms")

        let freeze = Process()
        freeze.executableURL = URL(fileURLWithPath: freezer)
        freeze.arguments = [String(watcher)]
        let control = Pipe()
        let report = Pipe()
        freeze.standardInput = control
        freeze.standardOutput = report
        try freeze.run()
        defer {
            try? control.fileHandleForWriting.close()
            if freeze.isRunning { kill(freeze.processIdentifier, SIGKILL) }
            freeze.waitUntilExit()
        }
        let frozen = String(decoding: report.fileHandleForReading.readData(ofLength: 7), as: UTF8.self)
        try #require(frozen == "FROZEN\n", "the watcher thread is held: \(frozen)")
        let unhealthy = "unhealthy: the watcher of pid \(pid) stopped turning"
        #expect(listener.wait(timeout: .seconds(20)) { Self.firstTime($0, containing: unhealthy) != nil })
        let stuckAt = try #require(Self.firstTime(listener.messages, containing: unhealthy))
        // A window in which pings would have come every 150 ms if the daemon still claimed to be healthy.
        usleep(1_000_000)
        let thawAt = sw_monotonic_ns()
        try control.fileHandleForWriting.close()
        freeze.waitUntilExit()
        #expect(freeze.terminationStatus == 0)
        #expect(
            listener.wait(timeout: .seconds(20)) { messages in
                messages.contains { $0.receivedNanos > thawAt && $0.text.hasPrefix("STATUS=watching 1 process ") }
                    && Self.pings(messages).filter { $0 > thawAt }.count >= 2
            }, "healthy again: status and pings resume")
        let during = Self.pings(listener.messages).filter { $0 > stuckAt + 200_000_000 && $0 < thawAt }
        #expect(during.isEmpty, "\(during.count) WATCHDOG=1 while a watcher was stuck")
        let state = try String(contentsOfFile: "/proc/\(daemonPID)/task/\(watcher)/status", encoding: .utf8)
        #expect(state.contains("TracerPid:\t0"), "the watcher thread runs untraced again")
    }

    /// `WatchdogSignal=` of a shipped unit, as a signal number.
    static func watchdogSignal(unit: String) throws -> Int32 {
        let text = try String(contentsOfFile: Fixtures.packageRoot.path + "/Config/systemd/\(unit)", encoding: .utf8)
        let line = try #require(text.split(separator: "\n").first { $0.hasPrefix("WatchdogSignal=") })
        let names: [String: Int32] = ["SIGKILL": SIGKILL, "SIGTERM": SIGTERM, "SIGABRT": SIGABRT]
        return try #require(names[String(line.dropFirst("WatchdogSignal=".count))])
    }

    @Test(.timeLimit(.minutes(3)), arguments: ["myservice.service", "stallwatch-daemon.service"])
    func theUnitsWatchdogSignalEndsAStuckSwiftProcess(unit: String) throws {
        let signal = try Self.watchdogSignal(unit: unit)
        let stuck = try NotifiedChild(
            Fixtures.executable("stallwatch-demo"),
            ["stall", "--kind", "cpu", "--duration-ms", "30000", "--delay-ms", "0", "--no-watchdog", "--no-heartbeat"],
            environment: [:])
        defer { stuck.stop() }
        // Busy on its loop: its CPU time grows.
        let pid = stuck.process.processIdentifier
        func cpuTicks() -> Int {
            let stat = (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)) ?? ""
            let fields = stat.split(separator: ")").last?.split(separator: " ") ?? []
            return fields.count > 12 ? Int(fields[11]) ?? 0 : 0
        }
        let deadline = ContinuousClock.now + .seconds(20)
        while cpuTicks() < 20 && ContinuousClock.now < deadline { usleep(20_000) }
        #expect(cpuTicks() >= 20, "the demo is stuck on the CPU")
        kill(pid, signal)
        let exitDeadline = ContinuousClock.now + .seconds(10)
        while stuck.process.isRunning && ContinuousClock.now < exitDeadline { usleep(10_000) }
        #expect(!stuck.process.isRunning, "signal \(signal) ended the stuck process")
    }

    @Test(arguments: ["myservice.service", "stallwatch-daemon.service"])
    func theShippedUnitsPassSystemdsVerifier(unit: String) throws {
        try #require(
            FileManager.default.isExecutableFile(atPath: "/usr/bin/systemd-analyze"),
            "/usr/bin/systemd-analyze is missing (the Debian package systemd, scripts/bootstrap.sh)")
        let directory = Fixtures.temporaryDirectory("sd-verify")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let text = try String(contentsOfFile: Fixtures.packageRoot.path + "/Config/systemd/\(unit)", encoding: .utf8)
        // The binaries are not installed here: point ExecStart at a real executable, keep everything else.
        let local = text.split(separator: "\n", omittingEmptySubsequences: false).map { line in
            line.hasPrefix("ExecStart=") ? "ExecStart=/bin/true" : String(line)
        }
        try local.joined(separator: "\n").write(toFile: directory + "/\(unit)", atomically: true, encoding: .utf8)
        let result = try Fixtures.run("/usr/bin/systemd-analyze", ["verify", directory + "/\(unit)"])
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        #expect(!(result.stdout + result.stderr).contains(unit), "\(result.stdout)\(result.stderr)")
    }
}
