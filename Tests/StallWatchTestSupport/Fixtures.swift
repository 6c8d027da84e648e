// Spawning the package's executables and other programs, and reading what they wrote, for integration tests.
import Foundation
import StallWatch
import Testing

package enum Fixtures {
    /// How long each of the demo's stalls ran by its own clock, in milliseconds, from its standard error.
    package static func demoStallsRanMs(_ stderr: String) -> [Double] {
        stderr.split(separator: "\n").compactMap { line in
            guard let range = line.range(of: " stall ran ") else { return nil }
            return Double(line[range.upperBound...].prefix { $0 != " " })
        }
    }

    /// When each of the demo's stalls ran by its own clock, from its standard error (`… ran 300.1 ms (from S to
    /// S)`, seconds since 1970).
    package static func demoStallIntervals(_ stderr: String) -> [ClosedRange<Date>] {
        stderr.split(separator: "\n").compactMap { line in
            guard let from = line.range(of: " (from "),
                let to = line.range(of: " to ", range: from.upperBound..<line.endIndex),
                let start = Double(line[from.upperBound..<to.lowerBound]),
                let end = Double(line[to.upperBound...].prefix { $0 != ")" }), start <= end
            else { return nil }
            return Date(timeIntervalSince1970: start)...Date(timeIntervalSince1970: end)
        }
    }

    /// How long the demo's stall thread waited for a CPU from the stall's start to its report, as the demo says on
    /// standard error (`stallwatch-demo: the stall's thread waited 12.3 ms for a CPU`); nil when it did not.
    package static func demoStallThreadRunQueueMs(_ stderr: String) -> Double? {
        stderr.split(separator: "\n").lazy.compactMap { line -> Double? in
            guard let range = line.range(of: "the stall's thread waited ") else { return nil }
            return Double(line[range.upperBound...].prefix { $0 != " " })
        }.first
    }

    /// The directory holding the test bundle and the package's executables.
    package static let productsDirectory: URL = {
        let exe =
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        return URL(fileURLWithPath: exe).deletingLastPathComponent()
    }()

    /// The package's root directory in the source tree.
    package static let packageRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The package's executable `name` (stallwatch, stallwatch-demo) beside the test bundle.
    package static func executable(_ name: String) -> String { productsDirectory.appendingPathComponent(name).path }

    /// A fresh private directory under the system temporary directory, removed by the caller.
    package static func temporaryDirectory(_ label: String) -> String {
        let path = NSTemporaryDirectory() + "stallwatch-\(label)-\(UUID().uuidString.prefix(8))"
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    /// How a program ended and what it wrote.
    package struct Output: Sendable {
        package var status: Int32
        package var stdout: String
        package var stderr: String
    }

    /// Runs a program to completion (killing it after `timeout`), capturing its output. Both pipes are read to the
    /// end before waiting, each on a thread of its own, so a full pipe cannot stall the program.
    package static func run(
        _ path: String, _ arguments: [String], environment: [String: String] = [:], timeout: Duration = .seconds(60)
    ) throws -> Output {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        var env = ProcessInfo.processInfo.environment
        for (k, v) in environment { env[k] = v }
        process.environment = env
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let pid = process.processIdentifier
        let killer = DispatchWorkItem { kill(pid, SIGKILL) }
        DispatchQueue.global().asyncAfter(deadline: .now() + Double(timeout.components.seconds), execute: killer)
        let stderrData = Locked(Data?.none)
        let drain = Thread { stderrData.withLock { $0 = err.fileHandleForReading.readDataToEndOfFile() } }
        drain.start()
        let stdoutData = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        killer.cancel()
        while stderrData.withLock({ $0 == nil }) { usleep(1000) }
        return Output(
            status: process.terminationStatus, stdout: String(decoding: stdoutData, as: UTF8.self),
            stderr: String(decoding: stderrData.withLock { $0 ?? Data() }, as: UTF8.self))
    }

    /// Every report file in `directory`, decoded.
    package static func reports(in directory: String) throws -> [StallReport] {
        let names = try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasSuffix(".json") }
        return try names.sorted().map { try ReportStore.load(path: directory + "/" + $0) }
    }

    package static let jsonschemaAvailable: Bool = {
        (try? run("/usr/bin/env", ["python3", "-c", "import jsonschema"], timeout: .seconds(30)).status) == 0
    }()

    /// Validates every report in `directory` against Config/stall-report.schema.json with the PyPI package
    /// `jsonschema` (test tooling `scripts/bootstrap.sh` installs): its absence is a failure that names it.
    package static func expectReportsValidate(
        in directory: String, sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        try #require(
            jsonschemaAvailable,
            "python3 cannot import jsonschema (the PyPI package scripts/bootstrap.sh installs): reports not validated",
            sourceLocation: sourceLocation)
        let script = packageRoot.appendingPathComponent("scripts/validate-reports.py").path
        let files = try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasSuffix(".json") }
            .map { directory + "/" + $0 }
        let result = try run("/usr/bin/env", ["python3", script] + files, timeout: .seconds(60))
        #expect(
            result.status == 0, "schema validation failed:\n\(result.stdout)\(result.stderr)",
            sourceLocation: sourceLocation)
    }
}
