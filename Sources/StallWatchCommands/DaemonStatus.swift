// DaemonStatus: what `stallwatch daemon`'s STATUS= line says: processes watched, loops stalled now, stalls reported.
import StallWatch

/// The counts behind the daemon's `STATUS=` line.
///
/// A process can have several loop threads watched (`--threads`, `--tid`), and several of them can stall at once:
/// stalls are counted per loop thread, so the end of one thread's stall does not hide another's still going on in
/// the same process.
struct DaemonStatus: Sendable, Equatable {
    /// One loop thread with a stall going on.
    struct StalledLoop: Hashable, Comparable, Sendable {
        let processID: Int32
        let threadID: Int32

        static func < (a: Self, b: Self) -> Bool { (a.processID, a.threadID) < (b.processID, b.threadID) }
    }

    /// Processes watched, as the last scan counted them.
    var watched = 0
    /// The loop threads stalled now.
    private(set) var stalled: Set<StalledLoop> = []
    /// Stalls over (ended or unrecovered) since the daemon started.
    private(set) var stalls = 0

    /// Processes with at least one loop thread stalled now.
    var stalledProcesses: Int { Set(stalled.map(\.processID)).count }

    /// Counts a stall event of a loop thread of process `pid` (the thread is the report's loop thread).
    mutating func observe(pid: Int32, _ event: StallEvent) {
        switch event {
        case .began(let report):
            stalled.insert(StalledLoop(processID: pid, threadID: report.loop.threadId))
        case .ended(let report):
            stalled.remove(StalledLoop(processID: pid, threadID: report.loop.threadId))
            if report.status != .withdrawn { stalls += 1 }
        default: break
        }
    }

    /// `watching 2 processes in DIR; stalled now: pid 41, pid 42 (threads 43, 44); 3 stalls reported`, and which
    /// watchers stopped turning (`stuck`, their pids). A process is named alone when its one stalled loop is its
    /// main thread, and with its stalled threads otherwise.
    func line(directory: String, stuck: [Int32]) -> String {
        var line = "watching \(watched) process\(watched == 1 ? "" : "es") in \(directory)"
        if !stalled.isEmpty {
            let byProcess = Dictionary(grouping: stalled, by: \.processID).sorted { $0.key < $1.key }
            let named = byProcess.map { pid, loops in
                let threads = loops.map(\.threadID).sorted()
                if threads == [pid] { return "pid \(pid)" }
                let list = threads.map(String.init).joined(separator: ", ")
                return "pid \(pid) (thread\(threads.count == 1 ? "" : "s") \(list))"
            }
            line += "; stalled now: " + named.joined(separator: ", ")
        }
        line += "; \(stalls) stall\(stalls == 1 ? "" : "s") reported"
        if !stuck.isEmpty {
            // No durations in the line: it changes when the set of stuck watchers does, not at every scan.
            let pids = stuck.map(String.init).joined(separator: ", ")
            line += "; unhealthy: the watcher of pid \(pids) stopped turning, watchdog pings paused"
        }
        return line
    }
}
