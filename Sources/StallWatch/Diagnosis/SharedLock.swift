// SharedLock: the processes that map the shared memory a process-shared lock's futex word lives in.
import CStallWatchCore

#if canImport(Glibc)
    import Glibc
#endif

/// Finds who may hold a process-shared lock the loop waits on — a POSIX semaphore in `/dev/shm` (`sem_open`,
/// Python's `multiprocessing.Lock`), a `PTHREAD_PROCESS_SHARED` mutex in a shared file mapping: a futex wait without
/// `FUTEX_PRIVATE_FLAG` on a word in a shared mapping. The other processes that map the same file (inode) over the
/// word's offset are the only ones that can hold it. A word that records its owner (a PI futex, a glibc mutex's
/// `__owner`) naming a thread of one of them makes that process the recorded owner; otherwise each is a candidate,
/// a fellow waiter on the same word last.
enum SharedLock {
    /// The lock and who may hold it, as one sample found them.
    struct Finding: Sendable, Hashable {
        /// `/dev/shm/sem.mp-1a2b (deleted) at offset 0x0`.
        var object: String
        /// The processes mapping it (other than the waiter), non-waiters first.
        var candidates: [Candidate]
        /// The process (and thread) the lock word itself names as its owner, described when read.
        var owner: OtherProcessWait?
        /// Processes whose maps could not be read (access refused).
        var refused = 0
    }

    struct Candidate: Sendable, Hashable {
        var processID: Int32
        var name: String
        /// A thread of it waits on the same word: a fellow waiter, not a holder.
        var waiting: Bool
    }

    /// One shared (`s`) file-backed line of `maps`.
    struct SharedMapping: Sendable, Hashable {
        var start: UInt64
        var end: UInt64
        var offset: UInt64
        var device: Substring
        var inode: UInt64
        var path: Substring
    }

    /// The shared, file-backed mappings of a `maps` text; other, hostile or truncated lines are skipped.
    static func sharedMappings(in text: String) -> [SharedMapping] {
        text.split(separator: "\n").compactMap { line in
            let f = line.split(separator: " ", maxSplits: 5, omittingEmptySubsequences: true)
            guard f.count >= 5, f[1].count == 4, f[1].last == "s", let inode = UInt64(f[4]), inode != 0 else {
                return nil
            }
            let bounds = f[0].split(separator: "-")
            guard bounds.count == 2, let start = UInt64(bounds[0], radix: 16), let end = UInt64(bounds[1], radix: 16),
                start < end, let offset = UInt64(f[2], radix: 16)
            else { return nil }
            let path = f.count > 5 ? f[5].drop { $0 == " " } : ""
            return SharedMapping(start: start, end: end, offset: offset, device: f[3], inode: inode, path: path)
        }
    }

    /// The shared lock behind `wait` (a futex call of process `pid`); nil for a private futex, or a word in no
    /// shared file mapping.
    static func finding(pid: Int32, wait: ThreadWait) -> Finding? {
        guard wait.number == 202, wait.arguments.count == 6, wait.arguments[1] & 128 == 0 else { return nil }
        let op = wait.arguments[1] & 0x7f
        guard [0, 9, 6, 13].contains(op) else { return nil }  // WAIT, WAIT_BITSET, LOCK_PI, LOCK_PI2
        let address = wait.arguments[0]
        guard let maps = ProcDirectory(processID: pid).text("maps"),
            let mine = sharedMappings(in: maps).first(where: { $0.start <= address && address < $0.end })
        else { return nil }
        let fileOffset = address - mine.start + mine.offset
        var finding = Finding(
            object: "\(mine.path.isEmpty ? "inode \(mine.inode)" : String(mine.path)) at offset 0x"
                + String(fileOffset, radix: 16), candidates: [])
        // The word may name its owner: a PI futex's low 30 bits, a glibc mutex's __owner (+8) in its contended
        // state (a wait for the value 2).
        var words: (UInt32, UInt32, UInt32) = (0, 0, 0)
        let read = withUnsafeMutableBytes(of: &words) { sw_read_memory(pid, address, $0.baseAddress, 12) }
        var recorded: Int32?
        if read == 12, op == 6 || op == 13 { recorded = Int32(bitPattern: words.0 & 0x3fff_ffff) }
        if read == 12, op == 0 || op == 9, wait.arguments[2] == 2, words.0 != 0 {
            recorded = Int32(bitPattern: words.2)
        }
        for other in ProcSystem.processIDs() where other != pid {
            let process = ProcDirectory(processID: other)
            guard let text = process.text("maps") else {
                if errno == EACCES || errno == EPERM { finding.refused += 1 }
                continue
            }
            guard text.contains(" \(mine.inode) "),
                let mapped = sharedMappings(in: text).first(where: {
                    $0.inode == mine.inode && $0.device == mine.device && $0.offset <= fileOffset
                        && fileOffset < $0.offset + ($0.end - $0.start)
                })
            else { continue }
            let theirAddress = mapped.start + (fileOffset - mapped.offset)
            let threads = process.threadIDs()
            if let recorded, recorded > 0, threads.contains(recorded) {
                var owner = OtherProcessWait(object: .semaphore, evidence: "")
                owner.describe(pid: other, fd: nil)
                owner.threadID = recorded
                owner.state = ThreadProbe.read(pid: other, tid: recorded).map {
                    $0.stateDescription + ($0.syscallName.map { ", in \($0)" } ?? "")
                }
                owner.reason = "its thread \(recorded) is the owner the shared lock's word records (\(finding.object))"
                finding.owner = owner
            }
            let waiting = threads.prefix(256).contains { tid in
                guard let call = process.thread(tid).syscall(), call.number == 202, call.arguments.count == 6 else {
                    return false
                }
                return call.arguments[0] == theirAddress
            }
            finding.candidates.append(
                Candidate(processID: other, name: PrintableText.filtered(process.comm() ?? ""), waiting: waiting))
        }
        finding.candidates.sort { !$0.waiting && $1.waiting }
        return finding
    }
}

extension CauseClassifier {
    /// `lock` on a process-shared lock: its recorded owner in another process as `blockingProcess`, or the other
    /// processes that map it as candidate holders (`likely` only when exactly one of them does not wait on it).
    static func sharedLockCause(_ found: SharedLock.Finding, evidence: [String]) -> StallReport.Cause {
        var evidence = evidence
        evidence.append("the lock is process-shared: its futex word lives in \(found.object), shared memory")
        if let owner = found.owner {
            evidence.append("the lock's word records its owner: \(owner.processPhrase)")
            return .init(kind: .lock, evidence: evidence, blockingProcess: blockingProcess(owner))
        }
        // One process that maps the lock and does not wait on it is the likely holder; processes whose maps could
        // not be read are said in the evidence (an unlinked object is mapped only by those that inherited it).
        let holders = found.candidates.filter { !$0.waiting }
        let confidence: StallReport.Cause.CandidateHolder.Confidence = holders.count == 1 ? .likely : .possible
        let data = found.candidates.map { candidate in
            StallReport.Cause.CandidateHolder(
                threadId: candidate.processID, processId: candidate.processID, name: candidate.name,
                reason: candidate.waiting
                    ? "maps the shared lock but waits on it too"
                    : "maps the shared lock (\(found.object)) and does not wait on it",
                confidence: candidate.waiting ? .possible : confidence)
        }
        let named = found.candidates.map {
            "process \($0.processID) (\($0.name))" + ($0.waiting ? ", waiting too" : "")
        }
        evidence.append(
            found.candidates.isEmpty
                ? "no other process maps the lock"
                    + (found.refused > 0 ? " that could be read (\(found.refused) refused access)" : "")
                : "candidate holders, not certain (the lock keeps no owner): " + named.joined(separator: "; ")
                    + (found.refused > 0
                        ? "; the maps of \(found.refused) other process\(found.refused == 1 ? "" : "es") could not be read "
                            + "(access refused)" : "")
        )
        return .init(kind: .lock, evidence: evidence, candidateHolders: data.isEmpty ? nil : data)
    }
}
