// Inspector benchmarks: how long `reports list`, `summary`, `export` and `html` take on 5,000 reports, 1% damaged.
import Foundation
import StallWatch
import StallWatchCommands
import StallWatchInspector
import Synchronization

/// Writes 5,000 synthetic reports (4 samples of 16 frames each, 50 of them damaged) to a temporary directory
/// (tmpfs when there is one: setting up is not what is measured) and times the inspector commands on it, one
/// table row each: list and summary best of 3, the rest once.
func runInspectorBenchmarks() {
    Table.header("Inspector (5,000 reports, 1% damaged)")
    let temporary = FileManager.default.isWritableFile(atPath: "/dev/shm") ? "/dev/shm/" : NSTemporaryDirectory()
    let directory = temporary + "stallwatch-bench-inspect-\(getpid())"
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let bytes = InspectorBenchmarks.writeReports(to: directory, count: 5000, damagedEvery: 100)
    Table.row(["report files written", "5,000 (\(bytes / 5000) bytes each on average)", "50 damaged"])
    let runs: [(String, [String])] = [
        ("reports list", ["reports", "list", directory]),
        ("reports list --json", ["reports", "list", directory, "--json"]),
        ("reports summary", ["reports", "summary", directory]),
        ("reports summary --by frame --json", ["reports", "summary", directory, "--by", "frame", "--json"]),
        ("reports export --format folded", ["reports", "export", directory, "--format", "folded"]),
        (
            "reports export --format pprof",
            ["reports", "export", directory, "--format", "pprof", "-o", directory + ".pb.gz"]
        ),
        ("reports html", ["reports", "html", directory, "-o", directory + ".html"]),
    ]
    for (label, arguments) in runs {
        var best = Double.infinity
        var warnings = 0
        let repeats = label.hasPrefix("reports list") || label.hasPrefix("reports summary") ? 3 : 1
        for _ in 0..<repeats {
            let counter = InspectorBenchmarks.LineCounter()
            let console = Console(
                output: { _ in }, errorOutput: { text in counter.add(text) }, useColor: false, dataOutput: { _ in })
            let start = ContinuousClock.now
            _ = try? StallWatchCLI.run(arguments, console: console, environment: ["TZ": "UTC"])
            let elapsed = ContinuousClock.now - start
            best = min(best, Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
            warnings = counter.lines
        }
        Table.row([
            label, String(format: "%.0f ms", best * 1000),
            (repeats > 1 ? "best of \(repeats); " : "") + "\(warnings) lines on stderr"
                + (label == "reports list" ? " (bar < 1 s)" : ""),
        ])
        fflush(nil)
    }
    try? FileManager.default.removeItem(atPath: directory + ".pb.gz")
    try? FileManager.default.removeItem(atPath: directory + ".html")
}

enum InspectorBenchmarks {
    final class LineCounter: Sendable {
        private let count = Atomic<Int>(0)
        var lines: Int { count.load(ordering: .relaxed) }
        func add(_ text: String) { count.add(text.utf8.filter { $0 == 10 }.count, ordering: .relaxed) }
    }

    /// Writes `count` reports (every `damagedEvery`-th one damaged); returns the bytes written.
    static func writeReports(to directory: String, count: Int, damagedEvery: Int) -> Int {
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let start = Date(timeIntervalSince1970: 1_796_000_000)
        var total = 0
        for index in 0..<count {
            let path = "\(directory)/stall-bench-\(index).json"
            let data: Data
            if index % damagedEvery == damagedEvery / 2 {
                data = Data("{\"schemaVersion\": 1, \"id\": \"trunc".utf8)
            } else {
                data = (try? report(index, start: start).encodedJSON()) ?? Data()
            }
            total += data.count
            _ = FileManager.default.createFile(atPath: path, contents: data)
        }
        return total
    }

    /// A plausible report: one of 40 call paths, 4 samples of 16 frames, symbolicated with file:line.
    static func report(_ index: Int, start: Date) -> StallReport {
        let executable = "/usr/local/bin/service"
        let path = index % 40
        var samples: [StallReport.Sample] = []
        for sample in 0..<4 {
            var frames: [StackFrame] = []
            for depth in 0..<16 {
                let function = depth < 10 ? depth : 10 + (path + sample + depth) % 12
                let offset = UInt64(0x10000 + function * 0x400 + depth)
                frames.append(
                    StackFrame(
                        address: 0x55d0_a000_0000 + offset, image: executable, offset: offset,
                        symbol: "Service.Module\(function).handle(request:) -> ()", symbolOffset: depth,
                        file: "/src/service/Sources/Service/Module\(function).swift", line: 10 + depth))
            }
            samples.append(
                StallReport.Sample(offsetMs: 250 + Double(sample) * 50, frames: frames.reversed(), pauseMicros: 20))
        }
        let duration = 250 + Double((index * 7919) % 2000)
        return StallReport(
            id: "bench-\(index)", status: .ended, severity: duration > 2000 ? .hang : .stall,
            startedAt: start.addingTimeInterval(Double(index) * 30),
            endedAt: start.addingTimeInterval(Double(index) * 30 + duration / 1000),
            durationMs: duration,
            detection: .init(
                source: "in-process", strategy: .deadline, thresholdMs: 250, hangThresholdMs: 2000,
                detectedAt: start.addingTimeInterval(Double(index) * 30 + 0.25), latencyMs: 1),
            process: .init(
                pid: 4242, executable: executable, buildId: "3f9a1c0e5b7d2468ace013579bdf2468ace01357", host: "bench"),
            loop: .init(name: "main", threadId: 4242, phase: "beforeSources", iteration: UInt64(index)),
            samples: samples,
            images: [
                ImageInfo(
                    path: executable, buildId: "3f9a1c0e5b7d2468ace013579bdf2468ace01357", base: 0x55d0a0000000,
                    size: 0x100000)
            ],
            signature: StallSignature.compute(samples: samples),
            capture: .init(method: "signal", sampleIntervalMs: 50, samplesTaken: 4))
    }
}
