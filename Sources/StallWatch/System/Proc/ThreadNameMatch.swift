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
}
