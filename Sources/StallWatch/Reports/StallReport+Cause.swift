// The verdict of a stall report: what held the loop, and who or what held it.

extension StallReport {
    /// The verdict on what held the loop.
    public struct Cause: Codable, Sendable, Equatable {
        public enum Kind: String, Codable, Sendable, CaseIterable {
            /// `starved`: the loop thread was runnable but not given a CPU (run-queue wait, cgroup throttling, a
            /// late watchdog): the machine, not the loop's code, held it up. `hungAwait`: a Swift task suspended
            /// past `hungAwaitThresholdMs` with no thread stuck at all (the `hungAwait` section says on what).
            case cpu, lock, io, sleep, deadlock, starved, unknown, saturated, hungAwait
        }

        public var kind: Kind
        /// The facts behind the verdict, one sentence each.
        public var evidence: [String]
        /// The thread holding what the loop waited for (the lock owner), when known.
        public var blockingThreadId: Int32?
        /// For a deadlock: every thread in the cycle, the loop thread first.
        public var deadlockedThreadIds: [Int32]?
        /// For a deadlock: how sure the cycle is.
        public var deadlockCertainty: Certainty?
        /// Threads that may hold what the loop waited for when the lock records no owner (a semaphore, a runtime's
        /// own monitor or mutex), most likely first: candidates, never a certainty (``blockingThreadId`` is only
        /// ever an owner the process itself records).
        public var candidateHolders: [CandidateHolder]?
        /// Another process that holds what the loop waited for, as the kernel records it: a file lock's holder in
        /// `/proc/locks`, a SysV semaphore's last operator (its likely holder), the process at the other end of a
        /// pipe, Unix socket or loopback TCP connection the loop read.
        public var blockingProcess: BlockingProcess?

        /// A process other than the stalled one that holds what its loop waited for.
        public struct BlockingProcess: Codable, Sendable, Equatable {
            public var processId: Int32
            /// Its command name, when it could be read.
            public var name: String
            /// What it holds and how that is known, one sentence.
            public var reason: String
            /// Its thread most plausibly concerned (the one in a call on its end of the pipe or socket, or its only
            /// thread), when that could be told.
            public var threadId: Int32?
            /// That thread's state, or the process's, as read then: `sleeping, in clock_nanosleep`.
            public var state: String?
            /// That thread's stack, captured once while the loop waited (function names, no lines): where in its
            /// code the other process was. Only a watcher allowed to trace it captures it (the sidecar, `dump`);
            /// the embedded watchdog never stops another process. Nil when not captured.
            public var frames: [StackFrame]?

            package init(
                processId: Int32, name: String, reason: String, threadId: Int32? = nil, state: String? = nil,
                frames: [StackFrame]? = nil
            ) {
                self.processId = processId
                self.name = name
                self.reason = reason
                self.threadId = threadId
                self.state = state
                self.frames = frames
            }
        }

        /// How a deadlock's cycle was found.
        public enum Certainty: String, Codable, Sendable, CaseIterable {
            /// Every edge of the cycle is an owner the process records (a glibc mutex's owner field).
            case proven
            /// At least one edge is a candidate holder of a lock that records no owner.
            case likely
        }

        /// A thread that may hold the lock the loop waits for.
        public struct CandidateHolder: Codable, Sendable, Equatable {
            /// How strongly the evidence points at this thread.
            public enum Confidence: String, Codable, Sendable, CaseIterable {
                /// Part of a cycle of lock waits with the loop thread (each waits for a lock the other may hold), or
                /// recorded as the holder by the lock's own structure rather than by its word.
                case likely
                /// Its state allows it (blocked on another lock, running, sleeping), nothing more.
                case possible
            }

            public var threadId: Int32
            /// The process of the thread when it is not the stalled one; nil for a thread of the same process.
            public var processId: Int32?
            public var name: String
            /// Why it is a candidate, one sentence.
            public var reason: String
            public var confidence: Confidence

            package init(
                threadId: Int32, processId: Int32? = nil, name: String, reason: String, confidence: Confidence
            ) {
                self.threadId = threadId
                self.processId = processId
                self.name = name
                self.reason = reason
                self.confidence = confidence
            }
        }

        package init(
            kind: Kind, evidence: [String], blockingThreadId: Int32? = nil, deadlockedThreadIds: [Int32]? = nil,
            deadlockCertainty: Certainty? = nil, candidateHolders: [CandidateHolder]? = nil,
            blockingProcess: BlockingProcess? = nil
        ) {
            self.blockingProcess = blockingProcess
            self.kind = kind
            self.evidence = evidence
            self.blockingThreadId = blockingThreadId
            self.deadlockedThreadIds = deadlockedThreadIds
            self.deadlockCertainty = deadlockCertainty
            self.candidateHolders = candidateHolders
        }
    }
}
