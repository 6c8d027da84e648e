// Symbolication benchmarks: the shared symbol cache cold and warm, and what it buys the reports of a stall.
import CStallWatchCore
import Foundation
import StallWatch
import Synchronization

/// Times symbolication of this binary's own stacks (a Swift release build with DWARF) and the two report
/// deadlines it serves: detection → provisional report on disk (bar ≤ 10 ms p99) and stall end → final report on
/// disk (bar ≤ 20 ms), each for a watchdog whose symbol cache starts empty (cold) and for later stalls (warm).
enum SymbolicationBenchmarks {
    static func run() {
        Table.header("Symbolication and report deadlines (this binary: Swift, DWARF)")
        symbolicationCost()
        reportDeadlines()
        fflush(nil)
    }

    /// Full (names + lines) and fast (names) symbolication of a 24-deep stack here, with an empty cache and again
    /// from a second symbolicator on the warm cache: where a cold report's time goes.
    static func symbolicationCost() {
        let addresses = SymbolicationBenchmarks.stack(depth: 24)
        for mode in [SymbolicationMode.fast, .full] {
            var cold: [UInt64] = []
            var warm: [UInt64] = []
            for _ in 0..<5 {
                let cache = SymbolCache()
                var start = sw_monotonic_ns()
                _ = Symbolicator(processID: getpid(), mode: mode, cache: cache).symbolicate(addresses)
                cold.append(sw_monotonic_ns() - start)
                start = sw_monotonic_ns()
                _ = Symbolicator(processID: getpid(), mode: mode, cache: cache).symbolicate(addresses)
                warm.append(sw_monotonic_ns() - start)
            }
            let frames = addresses.count
            Table.row([
                "\(mode) symbolication, \(frames) frames, empty cache (median of 5)", millis(median(cold)),
                "opens each image: symbol table\(mode == .full ? " and DWARF line tables" : "")",
            ])
            Table.row([
                "\(mode) symbolication, \(frames) frames, a new symbolicator on the warm cache", millis(median(warm)),
                String(
                    format: "%.0f× faster than cold (another stall, report stage or process of the binary)",
                    median(cold) / max(1, median(warm))),
            ])
        }
    }

    /// Stalls of 300 ms over a 100 ms threshold: the first stall of each of 6 fresh watchdogs after emptying the
    /// shared cache (cold), then 20 more stalls of one watchdog (warm). Every stall writes its own report.
    static func reportDeadlines() {
        var cold = Deadlines()
        for _ in 0..<6 {
            SymbolCache.shared.removeAll()
            cold += stalls(1)
        }
        let warm = stalls(20)
        let floor = writeFloor()
        for (label, values, bar) in [
            ("provisional report's symbolication, cold cache", cold.provisionalSymbols, "bar ≤ 10 ms p99 (build)"),
            ("provisional report's symbolication, warm", warm.provisionalSymbols, "bar ≤ 10 ms p99 (build)"),
            ("detection → provisional report on disk, cold cache", cold.provisional, "capture, build, write"),
            ("detection → provisional report on disk, warm", warm.provisional, "capture, build, write"),
            ("final report's symbolication, cold cache", cold.finalSymbols, "lines prefetched during the stall"),
            ("final report's symbolication, warm", warm.finalSymbols, ""),
            ("stall end → final report on disk, cold cache", cold.final, "bar ≤ 20 ms"),
            ("stall end → final report on disk, warm", warm.final, "bar ≤ 20 ms"),
            (
                "stall end → file:line complete on disk, cold cache", cold.linesComplete,
                "\(cold.writtenPending) of \(cold.final.count) first written with lines pending, then rewritten"
            ),
            (
                "stall end → file:line complete on disk, warm", warm.linesComplete,
                "\(warm.writtenPending) of \(warm.final.count) first written with lines pending"
            ),
            ("write floor: 30 KB file, fsync, rename, fsync dir", floor, "the disk's share of both deadlines"),
        ] {
            let sorted = values.sorted()
            Table.row([
                "\(label) (n = \(sorted.count))", "p50 \(fmt(pct(sorted, 50))) ms",
                "p99 \(fmt(pct(sorted, 99))) ms, max \(fmt(sorted.last ?? .nan)) ms (\(bar))",
            ])
        }
        let statistics = SymbolCache.shared.statistics
        Table.row([
            "shared symbol cache after the warm stalls",
            "\(statistics.imagesOpened) images opened, \(statistics.imagesReused) reused",
            "\(statistics.hits) answers from the tables, \(statistics.misses) from libdwfl",
        ])
    }

    /// Milliseconds to write a report-sized file the way ``ReportWriter`` does (temp file, fsync, rename, fsync of
    /// the directory), 20 times: the anchor the on-disk deadlines cannot beat, measured in the same run.
    static func writeFloor() -> [Double] {
        let directory = NSTemporaryDirectory() + "stallwatch-bench-floor-\(getpid())"
        mkdir(directory, 0o700)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let bytes = [UInt8](repeating: UInt8(ascii: "x"), count: 30_000)
        var times: [Double] = []
        for index in 0..<20 {
            let start = sw_monotonic_ns()
            let temporary = directory + "/.tmp-\(index)"
            let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
            _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            fsync(fd)
            close(fd)
            rename(temporary, directory + "/report-\(index).json")
            let directoryFD = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            fsync(directoryFD)
            close(directoryFD)
            times.append(Double(sw_monotonic_ns() - start) / 1e6)
        }
        return times
    }

    /// `count` stalls of one new watchdog: milliseconds from detection to the provisional report and from the
    /// stall's end (the loop moved on) to the final report, both once the file is on disk.
    struct Deadlines {
        var provisional: [Double] = []
        var final: [Double] = []
        /// Each report's own symbolication (`capture.symbolicationMicros`), ms.
        var provisionalSymbols: [Double] = []
        var finalSymbols: [Double] = []
        /// Stall end → the report file has `"lines":"complete"` (the first write, or the rewrite that fills them).
        var linesComplete: [Double] = []
        /// Final reports first written with lines pending.
        var writtenPending = 0

        static func += (left: inout Deadlines, right: Deadlines) {
            left.provisional += right.provisional
            left.final += right.final
            left.provisionalSymbols += right.provisionalSymbols
            left.finalSymbols += right.finalSymbols
            left.linesComplete += right.linesComplete
            left.writtenPending += right.writtenPending
        }
    }

    static func stalls(_ count: Int) -> Deadlines {
        let loop = benchmarkLoop("symbolication")
        var config = StallWatchConfiguration()
        config.thresholdMs = 100
        config.sampleIntervalMs = 50
        config.reportDirectory = NSTemporaryDirectory() + "stallwatch-bench-symbolication-\(getpid())"
        config.maxReports = 1000
        config.maxReportsPerHour = 100_000
        config.dedupWindowMs = 0
        config.heartbeat = false
        defer { try? FileManager.default.removeItem(atPath: config.reportDirectory) }
        let deadlines = Mutex(Deadlines())
        let stallEnd = Atomic<UInt64>(0)
        let ended = DispatchSemaphore(value: 0)
        let lastFile = Mutex("")
        let directory = config.reportDirectory
        let watchdog = Watchdog(loop: loop, configuration: config) { event in
            switch event {
            case .began(let report):
                let ms = Date().timeIntervalSince(report.detection.detectedAt) * 1000
                deadlines.withLock {
                    $0.provisional.append(ms)
                    $0.provisionalSymbols.append((report.capture.symbolicationMicros ?? .nan) / 1000)
                }
            case .ended(let report):
                let ms = Double(sw_monotonic_ns() &- stallEnd.load(ordering: .acquiring)) / 1e6
                deadlines.withLock {
                    $0.final.append(ms)
                    $0.finalSymbols.append((report.capture.symbolicationMicros ?? .nan) / 1000)
                    if report.linesPending { $0.writtenPending += 1 }
                }
                lastFile.withLock { $0 = ReportWriter.path(ofReportID: report.id, in: directory) }
                ended.signal()
            default: break
            }
        }
        try! watchdog.start()
        let thread = Thread { loop.run() }
        thread.start()
        for _ in 0..<count {
            loop.perform {
                SymbolicationBenchmarks.stallDeep(milliseconds: 300, depth: 12)
                stallEnd.store(sw_monotonic_ns(), ordering: .releasing)
            }
            ended.wait()
            // The file has its lines once it says so: the first write when the tables were loaded, else the rewrite.
            let path = lastFile.withLock { $0 }
            let deadline = sw_monotonic_ns() + 10_000_000_000
            while sw_monotonic_ns() < deadline {
                let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
                if text.contains("\"lines\":\"complete\"") {
                    let ms = Double(sw_monotonic_ns() &- stallEnd.load(ordering: .acquiring)) / 1e6
                    deadlines.withLock { $0.linesComplete.append(ms) }
                    break
                }
                usleep(1_000)
            }
            usleep(20_000)
        }
        loop.stop()
        watchdog.stop()
        return deadlines.withLock { $0 }
    }

    /// Spins `milliseconds` at the bottom of `depth` Swift frames, so stacks have frames of this binary to name.
    @inline(never)
    static func stallDeep(milliseconds: Int, depth: Int) {
        if depth > 0 {
            stallDeep(milliseconds: milliseconds, depth: depth - 1)
        } else {
            LoopBenchmarks.busyWait(milliseconds: milliseconds)
        }
        blackHole(depth)
    }

    @inline(never)
    static func stack(depth: Int) -> [UInt64] {
        let result = depth > 0 ? stack(depth: depth - 1) : Thread.callStackReturnAddresses.map { UInt64($0.uintValue) }
        blackHole(depth)
        return result
    }

    @inline(never) static func blackHole(_ value: Int) { if value < 0 { print(value) } }

    static func median(_ values: [UInt64]) -> Double { Double(values.sorted()[values.count / 2]) }
    static func millis(_ nanos: Double) -> String { String(format: "%.2f ms", nanos / 1e6) }
}
