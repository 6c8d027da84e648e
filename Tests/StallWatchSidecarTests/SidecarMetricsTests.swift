// `stallwatch watch --metrics`: the sidecar serves Prometheus text of the stalls it saw.
import Foundation
import StallWatch
import StallWatchTestSupport
import Testing

@Suite(.offPool) struct SidecarMetricsTests {
    @Test(.timeLimit(.minutes(3)))
    func watchServesTheStallsItSawAsPrometheusText() throws {
        let directory = SidecarFixtures.temporaryDirectory("metrics")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let demo = try Spawned(
            SidecarFixtures.executable("stallwatch-demo"),
            [
                // The demo exits --delay-ms after the stall, and the sidecar with it; the fetcher below is started
                // before the stall ends (a python3 start-up took over 0.9 s on a loaded 2-core machine) and only
                // asks once the stall has ended.
                "stall", "--kind", "sleep", "--duration-ms", "600", "--threshold-ms", "150", "--delay-ms", "3000",
                "--no-watchdog", "--no-heartbeat", "--report-dir", directory,
            ])
        let sidecar = try Spawned(
            SidecarFixtures.executable("stallwatch"),
            [
                "watch", "--pid", "\(demo.pid)", "--threshold-ms", "150", "--report-dir", directory, "--metrics",
                "127.0.0.1:0",
            ])
        #expect(sidecar.waitFor(#""event":"metrics""#))
        let announcement = try #require(sidecar.stdout.split(separator: "\n").first { $0.contains(#""metrics""#) })
        let object = try #require(
            try JSONSerialization.jsonObject(with: Data(announcement.utf8)) as? [String: Any])
        let address = try #require(object["address"] as? String)
        #expect(address.hasPrefix("127.0.0.1:"))
        let fetch = Process()
        fetch.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        fetch.arguments = [
            "python3", "-c",
            "import urllib.request,sys; sys.stdin.readline(); "
                + "sys.stdout.write(urllib.request.urlopen('http://\(address)/metrics').read().decode())",
        ]
        let out = Pipe()
        let go = Pipe()
        fetch.standardOutput = out
        fetch.standardInput = go
        try fetch.run()
        #expect(sidecar.waitFor(#""event":"ended""#, timeout: .seconds(30)), "\(sidecar.stdout)\(sidecar.stderr)")
        go.fileHandleForWriting.write(Data("go\n".utf8))
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        fetch.waitUntilExit()
        #expect(fetch.terminationStatus == 0)
        #expect(text.contains("# TYPE stallwatch_stalls_total counter"))
        #expect(
            text.split(separator: "\n").contains { $0.hasPrefix("stallwatch_stalls_total{") && $0.hasSuffix(" 1") },
            "\(text)")
        #expect(text.contains("stallwatch_stall_duration_seconds_count{loop=\"stallwatch-demo\"} 1"), "\(text)")
        kill(sidecar.pid, SIGTERM)
        #expect(sidecar.wait() == 0)
        demo.wait()
    }
}
