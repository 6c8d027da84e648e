// LoopThreadRule: which threads of a watched process are loops of their own, by name: `[PROGRAM=]GLOB`.
import StallWatch

#if canImport(Glibc)
    import Glibc
#endif

/// A rule naming loop threads: a shell glob over thread names (`comm`, at most 15 bytes: `NIO-ELT-*`,
/// `worker-[0-9]`), optionally limited to the processes whose executable's file name matches a second glob
/// (`python3*=loop-*`). `stallwatch watch --threads` takes a bare glob; `stallwatch daemon --threads` takes
/// either form, repeatable, so each kind of target gets its own.
///
/// A rule is matched against a process's threads again at every rescan: a thread that starts later or is renamed to
/// match is picked up, one renamed away is dropped.
package struct LoopThreadRule: Sendable, Equatable, CustomStringConvertible {
    /// The glob over executable file names; nil: every process.
    package var program: String?
    /// The glob over thread names.
    package var threads: String

    package init(program: String? = nil, threads: String) {
        self.program = program
        self.threads = threads
    }

    /// Parses `GLOB` or `PROGRAM=GLOB`.
    ///
    /// - Throws: `.invalidArgument` when a part is empty.
    package init(parsing text: String) throws(SidecarError) {
        let parts = text.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
        if parts.count == 2 {
            program = parts[0]
            threads = parts[1]
        } else {
            program = nil
            threads = text
        }
        guard !threads.isEmpty, program?.isEmpty != true else {
            throw SidecarError(
                .invalidArgument, "thread rule \"\(text)\": expected GLOB or PROGRAM=GLOB, neither part empty",
                context: ["rule": text])
        }
    }

    package var description: String { program.map { "\($0)=\(threads)" } ?? threads }

    /// Whether the rule applies to a process whose executable is `executable` (a path; its file name is matched).
    package func applies(toExecutable executable: String) -> Bool {
        guard let program else { return true }
        let name = executable.split(separator: "/").last.map(String.init) ?? executable
        return fnmatch(program, name, 0) == 0
    }

    /// Whether a thread named `name` is a loop under this rule.
    package func matches(threadName name: String) -> Bool { fnmatch(threads, name, 0) == 0 }

    /// The threads of `pid` any of `rules` names, with their names, by thread id (the rules' `program` parts
    /// are the caller's to apply).
    static func matchingThreads(of pid: Int32, rules: [LoopThreadRule]) -> [Int32: String] {
        guard !rules.isEmpty else { return [:] }
        var out: [Int32: String] = [:]
        let process = ProcDirectory(processID: pid)
        for tid in process.threadIDs() {
            guard let name = process.thread(tid).comm() else { continue }
            if rules.contains(where: { $0.matches(threadName: name) }) { out[tid] = name }
        }
        return out
    }
}
