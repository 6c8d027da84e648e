// Spawning the demo executable and reading what it wrote, for integration tests.
import Foundation
import Testing

@testable import StallWatch

enum Fixtures {
    /// How long each of the demo's stalls ran by its own clock, in milliseconds, from its standard error.
    static func demoStallsRanMs(_ stderr: String) -> [Double] {
        stderr.split(separator: "\n").compactMap { line in
            guard let range = line.range(of: " stall ran ") else { return nil }
            return Double(line[range.upperBound...].prefix { $0 != " " })
        }
    }

    /// The directory holding the test bundle and the package's executables.
    static let productsDirectory: URL = {
        let exe =
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        return URL(fileURLWithPath: exe).deletingLastPathComponent()
    }()

    static let packageRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static func executable(_ name: String) -> String { productsDirectory.appendingPathComponent(name).path }

    /// A fresh private directory under the system temporary directory, removed by the caller.
    static func temporaryDirectory(_ label: String) -> String {
        let path = NSTemporaryDirectory() + "stallwatch-\(label)-\(UUID().uuidString.prefix(8))"
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    struct Output {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    /// Runs a program to completion (killing it after `timeout`), capturing its output.
    static func run(
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
        let stdoutData = out.fileHandleForReading.readDataToEndOfFile()
        let stderrData = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        killer.cancel()
        return Output(
            status: process.terminationStatus, stdout: String(decoding: stdoutData, as: UTF8.self),
            stderr: String(decoding: stderrData, as: UTF8.self))
    }

    /// Every report file in `directory`, decoded.
    static func reports(in directory: String) throws -> [StallReport] {
        let names = try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasSuffix(".json") }
        return try names.sorted().map { try ReportStore.load(path: directory + "/" + $0) }
    }

    static let jsonschemaAvailable: Bool = {
        (try? run("/usr/bin/env", ["python3", "-c", "import jsonschema"], timeout: .seconds(30)).status) == 0
    }()

    /// Validates every report in `directory` against Config/stall-report.schema.json with the PyPI package
    /// `jsonschema` (test tooling `scripts/bootstrap.sh` installs): its absence is a failure that names it.
    static func expectReportsValidate(in directory: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
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
