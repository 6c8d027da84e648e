// Finding a process's threads by name: the loop threads of services that run several (NIO-ELT-…, workers).
#if canImport(Glibc)
    import Glibc
#endif

extension ThreadProbe {
    /// The threads of `pid` whose name (`comm`, at most 15 bytes) matches the shell glob `pattern`
    /// (`NIO-ELT-*`, `worker-[0-9]`), by thread id.
    package static func threadIDs(pid: Int32, nameMatching pattern: String) -> [Int32] {
        threadIDs(pid: pid).filter { tid in
            guard let name = ProcDirectory(processID: pid, threadID: tid).comm() else { return false }
            return fnmatch(pattern, name, 0) == 0
        }
    }

    /// Of `threads` (thread id → name) of process `pid`, those whose name an older one of them has: on Linux a
    /// thread starts with its creator's name, so a thread a loop starts and never names carries the loop's name
    /// without being a loop. The oldest of each name (by start time, then id) is the one that may be.
    package static func namedAfterAnOlderThread(of pid: Int32, among threads: [Int32: String]) -> Set<Int32> {
        var out: Set<Int32> = []
        for tids in Dictionary(grouping: threads.keys, by: { threads[$0] ?? "" }).values where tids.count > 1 {
            let started = { (tid: Int32) in ProcDirectory(processID: pid, threadID: tid).stat()?.startTimeTicks ?? 0 }
            let byAge = tids.map { ($0, started($0)) }.sorted { ($0.1, $0.0) < ($1.1, $1.0) }
            out.formUnion(byAge.dropFirst().map(\.0))
        }
        return out
    }
}
