// A real stall's pprof export read by `go tool pprof` (Debian golang-go) and checked by `gzip -t`.
import Foundation
import StallWatchTestSupport
import Testing

@testable import StallWatch

@Suite(.offPool) struct PprofToolTests {
    static var goAvailable: Bool { FileManager.default.isExecutableFile(atPath: "/usr/bin/go") }

    @Test(.timeLimit(.minutes(2)))
    func goToolPprofNamesTheStallingFunctionAndTheFileIsRealGzip() throws {
        try #require(Self.goAvailable, "/usr/bin/go is missing (the Debian package golang-go, scripts/bootstrap.sh)")
        let directory = Fixtures.temporaryDirectory("pprof-tool")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let demo = try Fixtures.run(
            Fixtures.executable("stallwatch-demo"),
            ["stall", "--kind", "cpu", "--duration-ms", "700", "--threshold-ms", "150", "--report-dir", directory])
        #expect(demo.status == 0, "\(demo.stderr)")
        let profile = directory + "/stall.pb.gz"
        let export = try Fixtures.run(
            Fixtures.executable("stallwatch"), ["reports", "export", directory, "--format", "pprof", "-o", profile])
        #expect(export.status == 0, "\(export.stderr)")

        let tested = try Fixtures.run("/usr/bin/gzip", ["-t", profile])
        #expect(tested.status == 0, "\(tested.stderr)")
        let compressed = try #require(try FileManager.default.attributesOfItem(atPath: profile)[.size] as? Int)
        let inflated = try Fixtures.run("/bin/sh", ["-c", "gzip -dc '\(profile)' | wc -c"])
        let raw = try #require(Int(inflated.stdout.trimmingCharacters(in: .whitespacesAndNewlines)))
        // Stored (uncompressed) blocks would make the file larger than its content; deflate makes it ~2x smaller.
        #expect(2 * raw >= 3 * compressed, "\(compressed) bytes for \(raw): a real compression ratio")

        let environment = ["HOME": directory, "GOCACHE": directory + "/go-cache", "GOFLAGS": "-mod=mod"]
        let top = try Fixtures.run("/usr/bin/go", ["tool", "pprof", "-top", profile], environment: environment)
        #expect(top.status == 0, "\(top.stderr)")
        #expect(top.stdout.contains("Stalls.stallOnCPU"), "\(top.stdout)")
        #expect(top.stdout.contains("File: stallwatch-demo"), "the main binary is the first mapping: \(top.stdout)")
        #expect(!top.stderr.contains("Warning"), "\(top.stderr)")
        #expect(!top.stdout.contains("EventLoop. -> "), "no name cut by pprof's bracket stripping: \(top.stdout)")
    }
}
