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

    /// `--lock-book` puts the library first in the command's `LD_PRELOAD`, keeping what the caller preloads after
    /// it; the command runs with it mapped.
    @Test(.timeLimit(.minutes(1)))
    func runWithTheLockBookPreloadsItAheadOfTheCallersOwnPreloads() throws {
        let library = SidecarFixtures.executable("libStallWatchLockBook.so")
        let libm = "/lib/x86_64-linux-gnu/libm.so.6"
        let run = try Spawned(
            Self.stallwatch,
            [
                "run", "--lock-book", "--proc", "--", "/bin/sh", "-c",
                "echo \"PRELOAD=$LD_PRELOAD\"; grep -c libStallWatchLockBook.so /proc/$$/maps",
            ], environment: ["LD_PRELOAD": libm])
        #expect(run.wait() == 0, "run: \(run.stderr)")
        let lines = run.stdout.split(separator: "\n").map(String.init)
        #expect(lines.first == "PRELOAD=\(library):\(libm)", "\(lines)")
        #expect((lines.dropFirst().first.flatMap { Int($0) } ?? 0) >= 1, "\(lines)")
    }

    /// A `stallwatch` installed without the library beside it says where it looked, and starts nothing.
    @Test(.timeLimit(.minutes(1)))
    func runWithTheLockBookMissingNamesWhereItLookedAndRunsNothing() throws {
        let directory = SidecarFixtures.temporaryDirectory("lock-book-missing")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let copy = directory + "/stallwatch"
        try FileManager.default.copyItem(atPath: Self.stallwatch, toPath: copy)
        let marker = directory + "/ran"
        let run = try Spawned(copy, ["run", "--lock-book", "--", "/usr/bin/touch", marker])
        #expect(run.wait() == 127, "run: \(run.stderr)")
        #expect(
            run.stderr.contains("not installed beside stallwatch: looked for \(directory)/libStallWatchLockBook.so"))
        #expect(!FileManager.default.fileExists(atPath: marker))
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
