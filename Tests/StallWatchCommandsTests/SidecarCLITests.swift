// The sidecar commands as users run them: exit codes, signal forwarding, unrecovered stalls.
import Foundation
import StallWatch
import StallWatchTestSupport
import Testing

@Suite(.offPool, .serialized) struct SidecarCLITests {
    static let stallwatch = SidecarFixtures.executable("stallwatch")

    @Test(.timeLimit(.minutes(3)))
    func runExitsWithTheCommandsStatusOrSignal() throws {
        let exit7 = try Spawned(Self.stallwatch, ["run", "--", "/bin/sh", "-c", "exit 7"])
        #expect(exit7.wait() == 7)
        let ok = try Spawned(Self.stallwatch, ["run", "--", "/bin/true"])
        #expect(ok.wait() == 0)
        let killed = try Spawned(Self.stallwatch, ["run", "--", "/bin/sh", "-c", "kill -KILL $$"])
        #expect(killed.wait() == 128 + SIGKILL)
        let missing = try Spawned(Self.stallwatch, ["run", "--", "/nonexistent/command"])
        #expect(missing.wait() == 127)
        #expect(missing.stderr.contains("cannot run /nonexistent/command"))
    }

    @Test(.timeLimit(.minutes(3)))
    func runForwardsSIGTERMAndSIGINTToTheCommand() throws {
        for (signal, name) in [(SIGTERM, "TERM"), (SIGINT, "INT")] {
            let run = try Spawned(Self.stallwatch, ["run", "--proc", "--", "/bin/sleep", "30"])
            #expect(run.waitFor("\"watching\""), "run: \(run.stderr)")
            kill(run.pid, signal)
            #expect(run.wait(timeout: .seconds(10)) == 128 + signal, "SIG\(name)")
        }
    }

    @Test(.timeLimit(.minutes(3)))
    func aStallStillGoingWhenTheCommandDiesIsUnrecovered() throws {
        let directory = SidecarFixtures.temporaryDirectory("unrecovered")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let run = try Spawned(
            Self.stallwatch,
            [
                "run", "--threshold-ms", "150", "--report-dir", directory, "--",
                SidecarFixtures.executable("stallwatch-demo"), "stall", "--kind", "sleep", "--duration-ms", "20000",
                "--delay-ms", "1000", "--no-watchdog",
            ])
        #expect(run.waitFor("\"began\""), "run: \(run.stderr)")
        let line = try #require(run.stderr.split(separator: "\n").first { $0.contains("\"watching\"") })
        let pid = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])["pid"] as? Int
        kill(Int32(try #require(pid)), SIGKILL)
        #expect(run.wait(timeout: .seconds(10)) == 128 + SIGKILL)
        let reports = SidecarFixtures.reports(in: directory)
        #expect(reports.count == 1)
        #expect(reports.first?.status == .unrecovered)
        #expect(reports.first?.detection.source == "heartbeat")
        #expect(reports.first?.notes.contains { $0.contains("exited") } == true, "\(reports.first?.notes ?? [])")
    }

    @Test func watchNamesAMissingProcessWithItsOwnExitCode() throws {
        let watch = try Spawned(Self.stallwatch, ["watch", "--pid", "abc"])
        #expect(watch.wait() == 2, "a pid that is not a number is a usage error")
        let gone = try Spawned(Self.stallwatch, ["watch", "--pid", "4194300"])
        #expect(gone.wait() == 4)
        #expect(gone.stderr.contains("no such process"))
        let help = try Spawned(Self.stallwatch, ["--help"])
        #expect(help.wait() == 0)
        #expect(help.stdout.contains("permission denied") && help.stdout.contains("128+N"))
    }
}
