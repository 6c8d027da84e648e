// ProcessDump: the stacks and kernel-side state of a live process's threads at one moment (`stallwatch dump`).
import Foundation

/// What `stallwatch dump --pid PID` found: the process, and for each thread dumped its /proc state (state letter,
/// system call, wait target, kernel wait channel), the owner of the lock it waits for, and its stack.
///
/// Frames have the shape of a report's frames in `stallwatch reports show --json` (addresses and offsets as
/// `0x…` strings, demangled and short names, file and line), so one script reads both.
package struct ProcessDump: Codable, Sendable, Equatable {
    /// `stallwatch-dump`: tells a dump from a report when files are mixed.
    package var kind = "stallwatch-dump"
    package var takenAt: Date
    package var process: StallReport.ProcessDescription
    /// How many threads the process had when its threads were listed.
    package var threadCount: Int
    /// The process's loop threads: those named by `--tid` or `--threads` or by a heartbeat segment; when nothing
    /// names them, a guess from what the threads do (``loopThreadsGuessed``).
    package var loopThreadIds: [Int32]
    /// True when ``loopThreadIds`` is a guess: threads in an event wait, their stuck numbered siblings and the main
    /// thread unless it is idle elsewhere (`stallwatch dump --help`).
    package var loopThreadsGuessed: Bool?
    /// Every thread, in order of relevance: a deadlock's threads, the loops (stuck ones first), the owners and
    /// candidate holders of what stuck threads wait for, other stuck threads, then the idle ones. Idle threads
    /// carry no stack unless `--all-threads` asked for every stack.
    package var threads: [Thread]
    /// The threads of a cycle of recorded lock owners (each waits for a lock the next one holds), when there is one.
    package var deadlockThreadIds: [Int32]?
    /// The images the frames point into (path, build-id, load base), to symbolicate elsewhere.
    package var images: [ImageInfo]
    /// Threads that would not stop, stacks that would not unwind, symbols that could not be read.
    package var errors: [String]

    package init(
        takenAt: Date, process: StallReport.ProcessDescription, threadCount: Int, loopThreadIds: [Int32],
        loopThreadsGuessed: Bool = false, threads: [Thread], deadlockThreadIds: [Int32]? = nil,
        images: [ImageInfo] = [], errors: [String] = []
    ) {
        self.deadlockThreadIds = deadlockThreadIds
        self.takenAt = takenAt
        self.process = process
        self.threadCount = threadCount
        self.loopThreadIds = loopThreadIds
        self.loopThreadsGuessed = loopThreadsGuessed ? true : nil
        self.threads = threads
        self.images = images
        self.errors = errors
    }

    /// One thread: a report's thread snapshot (same JSON keys) and what only a dump says about it.
    package struct Thread: Codable, Sendable, Equatable {
        /// Why this thread is in a dump without `--all-threads`.
        package enum Role: String, Codable, Sendable, CaseIterable {
            /// One of the process's loops (named, published, or guessed: ``ProcessDump/loopThreadsGuessed``).
            case loop
            /// It owns a lock that a stuck thread (or a thread in its owner chain) waits for.
            case lockOwner
            /// It may hold a lock that records no owner, which a stuck thread waits for: a candidate, not certain.
            case candidateHolder
            /// None of these.
            case other
        }

        /// What the thread is doing, from /proc and, for a futex wait, from its stack.
        package enum Activity: String, Codable, Sendable, CaseIterable {
            /// Running or runnable (state R).
            case onCPU
            /// Blocked in work: a lock acquisition, I/O, a sleep, uninterruptible (disk) sleep.
            case blocked
            /// Waiting for events or for work: an event wait (epoll, poll, select …), a condition variable.
            case idle
        }

        package var snapshot: StallReport.ThreadSnapshot
        package var role: Role
        /// The state letter's meaning (`sleeping`, `disk sleep`, …).
        package var stateDescription: String
        /// What the system call waits on, from its arguments: `word 0x…` (a futex), `epoll fd 4`, `fd 0`, `3 fds`.
        package var waitTarget: String?
        /// How long this thread alone was stopped to copy its stack, microseconds.
        package var pauseMicros: Double?
        /// For a stuck thread waiting on a lock that records no owner: the threads that may hold it, most likely
        /// first (candidates, not certain).
        package var candidateHolderIds: [Int32]?
        /// For a stuck thread waiting on a lock that records no owner in its word: the thread the lock's own
        /// structure records as holding it (``RecordedHolder``), likely, not certain; first of `candidateHolderIds`.
        package var recordedHolderId: Int32?
        /// Where that thread's handle was read, one sentence.
        package var recordedHolderEvidence: String?
        /// For a blocked thread: another process behind its wait (a file lock's holder, a SysV semaphore's last
        /// operator, a process-shared lock's recorded owner, the other end of its pipe or socket), as a stall
        /// report's `cause.blockingProcess` names it.
        package var blockingProcess: StallReport.Cause.BlockingProcess?
        /// What it is doing; nil in dumps of earlier versions.
        package var activity: Activity?
        /// A lower bound of how long it has not run (a blocked or idle thread), from its CPU's run-queue clock
        /// (`se.exec_start`), milliseconds; nil when running or when the kernel does not expose it.
        package var blockedForAtLeastMs: Double?
        /// For a running or runnable thread: how long it has been busy at least — the time between two looks of the
        /// dump (its start and its end) across which it made no voluntary context switch, milliseconds. Nil when it
        /// waited in between, or was not running at the first look.
        package var onCPUForAtLeastMs: Double?

        package init(
            snapshot: StallReport.ThreadSnapshot, role: Role, stateDescription: String, waitTarget: String? = nil,
            pauseMicros: Double? = nil, activity: Activity? = nil, blockedForAtLeastMs: Double? = nil,
            onCPUForAtLeastMs: Double? = nil, candidateHolderIds: [Int32]? = nil, recordedHolderId: Int32? = nil,
            recordedHolderEvidence: String? = nil, blockingProcess: StallReport.Cause.BlockingProcess? = nil
        ) {
            self.candidateHolderIds = candidateHolderIds
            self.recordedHolderId = recordedHolderId
            self.recordedHolderEvidence = recordedHolderEvidence
            self.blockingProcess = blockingProcess
            self.activity = activity
            self.blockedForAtLeastMs = blockedForAtLeastMs
            self.onCPUForAtLeastMs = onCPUForAtLeastMs
            self.snapshot = snapshot
            self.role = role
            self.stateDescription = stateDescription
            self.waitTarget = waitTarget
            self.pauseMicros = pauseMicros
        }

        private enum CodingKeys: String, CodingKey {
            case role, stateDescription, waitTarget, pauseMicros, activity, blockedForAtLeastMs, candidateHolderIds
            case blockingProcess, onCPUForAtLeastMs, recordedHolderId, recordedHolderEvidence
        }

        /// The snapshot's keys and the dump's side by side in one object.
        package init(from decoder: any Decoder) throws {
            snapshot = try StallReport.ThreadSnapshot(from: decoder)
            let container = try decoder.container(keyedBy: CodingKeys.self)
            role = try container.decode(Role.self, forKey: .role)
            stateDescription = try container.decode(String.self, forKey: .stateDescription)
            waitTarget = try container.decodeIfPresent(String.self, forKey: .waitTarget)
            pauseMicros = try container.decodeIfPresent(Double.self, forKey: .pauseMicros)
            activity = try container.decodeIfPresent(Activity.self, forKey: .activity)
            blockedForAtLeastMs = try container.decodeIfPresent(Double.self, forKey: .blockedForAtLeastMs)
            onCPUForAtLeastMs = try container.decodeIfPresent(Double.self, forKey: .onCPUForAtLeastMs)
            candidateHolderIds = try container.decodeIfPresent([Int32].self, forKey: .candidateHolderIds)
            recordedHolderId = try container.decodeIfPresent(Int32.self, forKey: .recordedHolderId)
            recordedHolderEvidence = try container.decodeIfPresent(String.self, forKey: .recordedHolderEvidence)
            blockingProcess = try container.decodeIfPresent(
                StallReport.Cause.BlockingProcess.self, forKey: .blockingProcess)
        }

        package func encode(to encoder: any Encoder) throws {
            try snapshot.encode(to: encoder)
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(role, forKey: .role)
            try container.encode(stateDescription, forKey: .stateDescription)
            try container.encodeIfPresent(waitTarget, forKey: .waitTarget)
            try container.encodeIfPresent(pauseMicros, forKey: .pauseMicros)
            try container.encodeIfPresent(activity, forKey: .activity)
            try container.encodeIfPresent(blockedForAtLeastMs, forKey: .blockedForAtLeastMs)
            try container.encodeIfPresent(onCPUForAtLeastMs, forKey: .onCPUForAtLeastMs)
            try container.encodeIfPresent(candidateHolderIds, forKey: .candidateHolderIds)
            try container.encodeIfPresent(recordedHolderId, forKey: .recordedHolderId)
            try container.encodeIfPresent(recordedHolderEvidence, forKey: .recordedHolderEvidence)
            try container.encodeIfPresent(blockingProcess, forKey: .blockingProcess)
        }
    }

    /// Pretty-printed JSON with a final newline, in the encoding of reports (``StallReport/makeEncoder()``).
    /// - Throws: `StallWatchError(.report)` if a value cannot be encoded (a non-finite number).
    package func encodedJSON() throws(StallWatchError) -> Data {
        do {
            var data = try StallReport.makeEncoder().encode(self)
            data.append(UInt8(ascii: "\n"))
            return data
        } catch {
            throw StallWatchError(.report, "cannot encode the dump of pid \(process.pid): \(error)")
        }
    }

    /// Reads what ``encodedJSON()`` wrote.
    package static func decode(_ data: Data) throws -> ProcessDump {
        try StallReport.makeDecoder().decode(ProcessDump.self, from: data)
    }
}

extension ThreadWait {
    /// What the call waits on, for people: `word 0x…` (a futex), `epoll fd 4`, `fd 0`, `3 fds`; nil when not in a call or
    /// when the call waits on nothing it names (a sleep).
    package var targetDescription: String? {
        guard let number, arguments.count == 6 else { return nil }
        switch number {
        case 202: return "word \(arguments[0].hexAddress)"
        case 232, 281, 441: return "epoll fd \(Int32(truncatingIfNeeded: arguments[0]))"
        case 426: return "io_uring fd \(Int32(truncatingIfNeeded: arguments[0]))"
        case 7, 271: return arguments[1] == 0 ? nil : "\(arguments[1]) fd\(arguments[1] == 1 ? "" : "s")"
        case 23, 270: return arguments[0] == 0 ? nil : "fds below \(arguments[0])"
        // read, write, pread64, pwrite64, readv, writev, accept, recvfrom, sendto, recvmsg, sendmsg, accept4,
        // fsync, fdatasync, flock, connect, sync_file_range
        case 0, 1, 17, 18, 19, 20, 43, 44, 45, 46, 47, 288, 74, 75, 73, 42, 277:
            return "fd \(Int32(truncatingIfNeeded: arguments[0]))"
        case 61: return "child \(Int32(truncatingIfNeeded: arguments[0]))"  // wait4
        default: return nil
        }
    }
}
