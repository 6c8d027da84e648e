// Inspection against its floor: `reports list` and `summary` over 3,000 real reports vs `cat` of the same files.
import Foundation
import StallWatch
import StallWatchCommands

/// Copies one real report (a 1 s CPU stall of the demo, else a synthetic one) 3,000 times under new ids and
/// times `cat` of all the files (the floor: reading the bytes) and `reports list` / `summary` in the same run,
/// best of 5 each, printing each command's ratio to `cat`. Bar: ≤ 3×.
func runInspectorFloorBenchmarks() {
    Table.header("Inspection vs cat (3,000 real reports)")
    let temporary = FileManager.default.isWritableFile(atPath: "/dev/shm") ? "/dev/shm/" : NSTemporaryDirectory()
    let directory = temporary + "stallwatch-bench-floor-\(getpid())"
    defer { try? FileManager.default.removeItem(atPath: directory) }
    try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    let (template, origin) = InspectorFloor.realReport(scratch: directory + ".demo")
    guard let template, let report = try? ReportStore.decode(template).get() else {
        Table.row(["no report to copy", "–", origin])
        return
    }
    let text = String(decoding: template, as: UTF8.self)
    var paths: [String] = []
    for index in 0..<3000 {
        let id = "20261201T000000.000Z-1-\(index)"
        let copy = text.replacingOccurrences(of: "\"id\":\"\(report.id)\"", with: "\"id\":\"\(id)\"")
        let path = ReportWriter.path(ofReportID: id, in: directory)
        _ = FileManager.default.createFile(atPath: path, contents: Data(copy.utf8))
        paths.append(path)
    }
    Table.row(["report files", "3,000 × \(template.count) bytes", origin])
    let cat = InspectorFloor.best(5) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/cat")
        process.arguments = paths
        process.standardOutput = FileHandle.nullDevice
        try? process.run()
        process.waitUntilExit()
    }
    Table.row(["cat of the 3,000 files (the floor)", String(format: "%.1f ms", cat * 1000), "best of 5"])
    for arguments in [["reports", "list", directory], ["reports", "summary", directory]] {
        let elapsed = InspectorFloor.best(5) {
            let console = Console(output: { _ in }, errorOutput: { _ in }, useColor: false, dataOutput: { _ in })
            _ = try? StallWatchCLI.run(arguments, console: console, environment: ["TZ": "UTC"])
        }
        Table.row([
            arguments.prefix(2).joined(separator: " "), String(format: "%.1f ms", elapsed * 1000),
            String(format: "%.2f× cat (bar ≤ 3×); best of 5", elapsed / cat),
        ])
    }
    let show = InspectorFloor.best(5) {
        let console = Console(output: { _ in }, errorOutput: { _ in }, useColor: false, dataOutput: { _ in })
        _ = try? StallWatchCLI.run(
            ["reports", "show", "20261201T000000.000Z-1-1234", "--dir", directory], console: console,
            environment: ["TZ": "UTC"])
    }
    Table.row([
        "reports show ID (one of 3,000)", String(format: "%.2f ms", show * 1000), "opens the file named for the id",
    ])
    fflush(nil)
}

enum InspectorFloor {
    /// The fastest of `runs` runs of `body`, seconds.
    static func best(_ runs: Int, _ body: () -> Void) -> Double {
        var best = Double.infinity
        for _ in 0..<runs {
            let start = ContinuousClock.now
            body()
            let elapsed = ContinuousClock.now - start
            best = min(best, Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
        }
        return best
    }

    /// The file of a 1 s CPU stall of the demo next to this binary, or a synthetic report; and where it came from.
    static func realReport(scratch: String) -> (Data?, String) {
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let demo = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
            .appendingPathComponent("stallwatch-demo").path
        if FileManager.default.isExecutableFile(atPath: demo) {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: demo)
            process.arguments = ["stall", "--kind", "cpu", "--duration-ms", "1000", "--report-dir", scratch]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            if (try? process.run()) != nil {
                process.waitUntilExit()
                let names = (try? FileManager.default.contentsOfDirectory(atPath: scratch)) ?? []
                if let name = names.first(where: ReportWriter.isReportFileName),
                    let data = FileManager.default.contents(atPath: scratch + "/" + name)
                {
                    return (data, "a 1 s CPU stall of stallwatch-demo")
                }
            }
        }
        let start = Date(timeIntervalSince1970: 1_796_000_000)
        return (try? InspectorBenchmarks.report(7, start: start).encodedJSON(), "synthetic (demo not found)")
    }
}
