// OtherProcesses: the process (and thread) behind a wait on something another process holds, as one sample saw it.
#if canImport(Glibc)
    import Glibc
#endif

/// Another process found behind what the loop thread waited for — a SysV semaphore's last operator, the other end
/// of a pipe or socket — or why none could be named. Found by reading the kernel's records (`/proc`, `semctl`,
/// `sock_diag`): nothing of either process is stopped or changed.
struct OtherProcessWait: Sendable, Hashable {
    /// What the loop waited on.
    enum Object: String, Sendable {
        case semaphore, pipe, unixSocket, tcp
    }

    var object: Object
    /// The process named, nil when none could be.
    var processID: Int32?
    /// Its command name, printable; empty when unread.
    var name = ""
    /// The thread of that process the wait is most plausibly on (the one in a call on the peer descriptor, or its
    /// only thread); nil when that cannot be told.
    var threadID: Int32?
    /// That thread's state (or the process's), as a phrase: `sleeping, in clock_nanosleep`.
    var state: String?
    /// What the process holds and how that is known, one sentence (the report's `blockingProcess.reason`).
    var reason = ""
    /// The finding as one evidence sentence, including why no process was named when none was.
    var evidence: String
}

/// What the kernel's records say of the other process behind one wait (a futex, a semaphore, descriptors): read the
/// same way for a stall's sample and for `dump`. At most one of the three is set.
struct OtherProcessLook: Sendable {
    /// A futex wait on a lock word shared with other processes, with the owner it names.
    var sharedLock: SharedLock.Finding?
    /// A SysV semaphore's last operator, or the process at the other end of a pipe or socket waited on.
    var otherProcess: OtherProcessWait?
    /// A timed wait on the process's own wake-ups only: a sleep, as a phrase.
    var ownWakeupSleep: String?

    /// Reads the records behind `wait` of process `pid`; `sharedLocks`: false when a futex wait's owner is known
    /// already (a lock of the process's own), so the shared-lock scan is not needed.
    static func read(pid: Int32, wait: ThreadWait, sharedLocks: Bool = true) -> Self {
        var look = Self()
        if wait.number == 202 {
            if sharedLocks { look.sharedLock = SharedLock.finding(pid: pid, wait: wait) }
        } else if let semaphore = SemaphoreHolder.holder(pid: pid, wait: wait) {
            look.otherProcess = semaphore
        } else if let waits = WaitDescriptors.read(pid: pid, wait: wait) {
            look.ownWakeupSleep = OwnWakeups.sleep(pid: pid, waits: waits)
            if look.ownWakeupSleep == nil { look.otherProcess = PeerEndpoints.otherProcess(pid: pid, waits: waits) }
        }
        return look
    }
}

/// The other processes' descriptors, read once per question: which processes hold a pipe or socket inode.
struct ProcessDescriptorIndex {
    /// The holders of each wanted link target (`pipe:[…]`, `socket:[…]`): pid and descriptor.
    private(set) var holders: [String: [(pid: Int32, fd: Int32)]] = [:]
    /// Processes whose descriptors could not be listed because access was refused.
    private(set) var refused = 0

    /// Lists every process's descriptors except `excluding`'s, keeping those that refer to one of `targets`.
    init(targets: Set<String>, excluding: Int32? = nil) {
        guard !targets.isEmpty else { return }
        for pid in ProcSystem.processIDs() where pid != excluding {
            guard let list = ProcDirectory(processID: pid).descriptors() else {
                if errno == EACCES || errno == EPERM { refused += 1 }
                continue
            }
            for (fd, target) in list where targets.contains(target) {
                holders[target, default: []].append((pid, fd))
            }
        }
    }

    /// The sentence saying what the reader could not see, or nil when it saw every process.
    var refusedNote: String? {
        refused == 0
            ? nil
            : "the descriptors of \(refused) process\(refused == 1 ? "" : "es") could not be read (access refused): "
                + "the other end may be held there"
    }
}

extension OtherProcessWait {
    /// Fills in the command name, and the thread and its state, of process `pid` whose descriptor `fd` (when known)
    /// is the other end: the thread in a call on that descriptor, else the only thread.
    mutating func describe(pid: Int32, fd: Int32?) {
        processID = pid
        let process = ProcDirectory(processID: pid)
        name = PrintableText.filtered(process.comm() ?? "")
        let threads = process.threadIDs()
        let probes = threads.prefix(256).compactMap { ThreadProbe.read(pid: pid, tid: $0) }
        let onDescriptor = fd.flatMap { fd in probes.first { $0.wait?.descriptor == UInt64(fd) } }
        guard let thread = onDescriptor ?? (probes.count == 1 ? probes[0] : nil) else {
            state = process.stat().map { ProcStat.name(ofState: $0.state) ?? String($0.state) }
            return
        }
        threadID = thread.threadID
        state = thread.stateDescription + (thread.syscallName.map { ", in \($0)" } ?? "")
    }

    /// "process 4242 (python3), thread 4242 sleeping, in clock_nanosleep"
    var processPhrase: String {
        guard let processID else { return "no process" }
        var phrase = "process \(processID)" + (name.isEmpty ? "" : " (\(name))")
        if let threadID, let state {
            phrase += ", thread \(threadID) \(state)"
        } else if let state {
            phrase += ", \(state)"
        }
        return phrase
    }
}
