// The task table's memory with 100,000 live (suspended) tasks, and what its cap does beyond it.
import CStallWatchConcurrency
import Dispatch
import Foundation
import StallWatch
import Synchronization

/// Continuations kept by the probe until it exits (its tasks stay suspended meanwhile).
final class ContinuationPile: Sendable {
    let continuations = Mutex<[CheckedContinuation<Void, Never>]>([])
    let suspended = Atomic<Int>(0)

    func keep(_ continuation: CheckedContinuation<Void, Never>) {
        continuations.withLock { $0.append(continuation) }
        suspended.add(1, ordering: .releasing)
    }
}

enum TaskTableMemoryBenchmarks {
    /// The probe (`stallwatch-bench task-memory-probe MAXTASKS TASKS`, MAXTASKS -1: pool not watched): starts
    /// `TASKS` tasks that each await a continuation nobody resumes, waits until all are suspended and (with a
    /// table) the table took all their job ends, then prints its own figures as one line of `key=value`: RSS
    /// (/proc/self/status), the table's rows in use, tasks dropped, events dropped, and the pages of the table's
    /// region that are resident (mincore) against its size.
    static func probe(maxTasks: Int, tasks: Int) -> Never {
        if maxTasks >= 0 {
            var configuration = StallWatchConfiguration()
            configuration.reportDirectory = NSTemporaryDirectory() + "stallwatch-bench-memory"
            configuration.heartbeat = false
            configuration.maxTasks = maxTasks
            configuration.hungAwaitThresholdMs = 0  // the suspensions are the point here, not reports of them
            do { try ConcurrencyWatchdog.enable(configuration: configuration) } catch {
                print("error=\(error.message)")
                exit(1)
            }
        }
        let pile = ContinuationPile()
        let deadline = ContinuousClock.now + .seconds(60)
        // Every task's one job end is in a row, counted as dropped (table full), or lost (a ring was full).
        func settled(_ started: Int) -> Bool {
            guard pile.suspended.load(ordering: .acquiring) == started else { return false }
            guard let header = sw_tasks_header_pointer()?.pointee else { return true }
            return UInt64(header.live) + header.tasks_dropped + header.events_dropped >= UInt64(started)
        }
        // Started 1,000 at a time, as a service accumulates them: a burst of 100,000 at once outruns the
        // watchdog's draining of the workers' rings on a loaded machine (those job ends are counted as lost).
        var started = 0
        while started < tasks {
            let batch = min(1000, tasks - started)
            for _ in 0..<batch { Task.detached { await withCheckedContinuation { pile.keep($0) } } }
            started += batch
            while !settled(started) && ContinuousClock.now < deadline { usleep(2000) }
        }
        var fields = ["settled=\(settled(tasks) ? 1 : 0)", "rssKiB=\(statusKiB("VmRSS"))"]
        if let pointer = sw_tasks_header_pointer() {
            let header = pointer.pointee
            fields += [
                "live=\(header.live)", "tasksDropped=\(header.tasks_dropped)",
                "eventsDropped=\(header.events_dropped)", "regionBytes=\(header.file_size)",
                "regionResident=\(residentBytes(UnsafeMutableRawPointer(pointer), Int(header.file_size)))",
                "privateBytes=\(sw_tasks_private_bytes(header.capacity))",
            ]
        }
        print(fields.joined(separator: " "))
        fflush(nil)
        exit(0)
    }

    /// A field of /proc/self/status in KiB (0 when absent).
    static func statusKiB(_ key: String) -> Int {
        let text = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix(key + ":") }) else { return 0 }
        return Int(line.split(whereSeparator: { $0 == " " || $0 == "\t" }).dropFirst().first ?? "") ?? 0
    }

    /// Bytes of `[base, base + size)` resident in memory, by mincore.
    static func residentBytes(_ base: UnsafeMutableRawPointer, _ size: Int) -> Int {
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let pages = (size + page - 1) / page
        var vector = [UInt8](repeating: 0, count: pages)
        guard mincore(base, size, &vector) == 0 else { return -1 }
        return vector.reduce(0) { $0 + Int($1 & 1) } * page
    }

    /// Runs the probe in a child process and returns its figures.
    static func runProbe(maxTasks: Int, tasks: Int) -> [String: String] {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
        process.arguments = ["task-memory-probe", String(maxTasks), String(tasks)]
        let output = Pipe()
        process.standardOutput = output
        guard (try? process.run()) != nil else { return [:] }
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        var fields: [String: String] = [:]
        for pair in String(decoding: data, as: UTF8.self).split(whereSeparator: \.isWhitespace) {
            let parts = pair.split(separator: "=", maxSplits: 1)
            if parts.count == 2 { fields[String(parts[0])] = String(parts[1]) }
        }
        return fields
    }

    /// 100,000 suspended tasks in a process without a table, with a table that holds them all (131,072 rows) and
    /// with one of 65,536 rows (the rest dropped), each run 3 times alternated: the median RSS of each against the
    /// one without a table, and the table's own resident pages.
    static func memory(tasks: Int = 100_000) {
        let modes = [-1, 0, 131_072, 65_536]
        var runs: [Int: [[String: String]]] = [:]
        for _ in 0..<3 {
            for maxTasks in modes { runs[maxTasks, default: []].append(runProbe(maxTasks: maxTasks, tasks: tasks)) }
        }
        func medianRSS(_ maxTasks: Int) -> Double {
            pct(runs[maxTasks]!.compactMap { Double($0["rssKiB"] ?? "") }.sorted(), 50)
        }
        let anchor = medianRSS(0)
        for maxTasks in modes {
            let all = runs[maxTasks]!
            let last = all.last!
            let unsettled = all.filter { $0["settled"] != "1" }.count
            let mib = { (key: String) in String(format: "%.1f", (Double(last[key] ?? "") ?? .nan) / 1_048_576) }
            var notes = maxTasks < 0 ? "pool not watched" : "job hook, no table (the anchor)"
            if maxTasks > 0 {
                notes =
                    String(format: "%+.1f MiB vs no table", (medianRSS(maxTasks) - anchor) / 1024)
                    + "; \(last["live"] ?? "?") rows live, \(last["tasksDropped"] ?? "?") tasks dropped, "
                    + "\(last["eventsDropped"] ?? "?") events dropped; region \(mib("regionResident")) of "
                    + "\(mib("regionBytes")) MiB resident, index and bookkeeping \(mib("privateBytes")) MiB reserved"
            }
            if unsettled > 0 { notes += "; \(unsettled) of 3 runs did not settle in 60 s" }
            Table.row([
                "\(tasks / 1000)k suspended tasks, maxTasks \(maxTasks < 0 ? "– (unwatched)" : String(maxTasks))",
                String(format: "RSS %.1f MiB (median of 3)", medianRSS(maxTasks) / 1024), notes,
            ])
        }
    }
}
