// The report section of a hung await: what a suspended Swift task waits for, since when, and who waits on it.
import Foundation

extension StallReport {
    /// A Swift task suspended past `hungAwaitThresholdMs` (the `hungAwait` section; cause `hungAwait`). The task
    /// itself is the report's `task` section, its async backtrace the point stack (frames of kind `async`).
    package struct HungAwaitDescription: Codable, Sendable, Equatable {
        /// What the runtime's dependency record says the task waits for: `continuation`, `task`, `taskGroup`,
        /// `executor` (enqueued on an actor that does not run it), or `unknown` when the record could not be read and
        /// checked (nothing is guessed).
        package var waitKind: String
        /// The awaited continuation context, task group or executor: an identity, hexadecimal in JSON.
        package var waitAddress: UInt64?
        /// For a wait on a task: the tasks awaited, each with its own state, down to the first that waits on
        /// something else than a task (the root of the wait) or until the chain loops (a deadlock of tasks).
        package var chain: [ChainLink]
        /// Why the chain stops: `root` (its last task waits on no task), `cycle` (it comes back to a task already in
        /// it), `depth` (too long to follow), `unreadable` (a task could not be read and checked), `completed`.
        package var chainEnd: String?
        /// When the wait began: the end of the task's last job on the global executor.
        package var suspendedSince: Date
        /// True when the task may have run unseen since (on an actor's executor): the age is then at most the
        /// report's duration, not exactly it.
        package var ageIsUpperBound: Bool
        /// The innermost function of the async backtrace: where the task awaits (`withCheckedContinuation(…)`).
        package var awaitSite: String?
        /// The first function of the application's own code in the backtrace: the one that awaits.
        package var awaitingFunction: String?
        /// Tasks that wait on this one as their child (a task group's parent, an `async let`'s).
        package var awaitedBy: [TaskReference]?
        /// When the task was first seen running, and how many of its jobs were seen.
        package var firstSeen: Date
        package var runs: Int
        /// Other tasks that hung at the same await site while this report was open: folded into it.
        package var foldedTaskIds: [UInt64]?

        package init(
            waitKind: String, waitAddress: UInt64? = nil, chain: [ChainLink] = [], chainEnd: String? = nil,
            suspendedSince: Date, ageIsUpperBound: Bool = false, awaitSite: String? = nil,
            awaitingFunction: String? = nil, awaitedBy: [TaskReference]? = nil, firstSeen: Date, runs: Int,
            foldedTaskIds: [UInt64]? = nil
        ) {
            self.waitKind = waitKind
            self.waitAddress = waitAddress
            self.chain = chain
            self.chainEnd = chainEnd
            self.suspendedSince = suspendedSince
            self.ageIsUpperBound = ageIsUpperBound
            self.awaitSite = awaitSite
            self.awaitingFunction = awaitingFunction
            self.awaitedBy = awaitedBy
            self.firstSeen = firstSeen
            self.runs = runs
            self.foldedTaskIds = foldedTaskIds
        }

        /// A task named in the section.
        package struct TaskReference: Codable, Sendable, Equatable {
            package var id: UInt64
            package var name: String?
            /// How it waits on the report's task: `taskGroup`, `asyncLet`.
            package var via: String?

            package init(id: UInt64, name: String? = nil, via: String? = nil) {
                self.id = id
                self.name = name
                self.via = via
            }
        }

        /// One awaited task and its own state.
        package struct ChainLink: Codable, Sendable, Equatable {
            package var id: UInt64
            package var name: String?
            /// `suspended`, `running`, `enqueued`, `completed`.
            package var state: String
            /// What this task in turn waits for (as ``HungAwaitDescription/waitKind``), when suspended.
            package var waitKind: String?
            /// How long it has been suspended (from the task table), when known.
            package var suspendedMs: Double?
            package var ageIsUpperBound: Bool?
            package var awaitSite: String?
            package var awaitingFunction: String?

            package init(
                id: UInt64, name: String? = nil, state: String, waitKind: String? = nil, suspendedMs: Double? = nil,
                ageIsUpperBound: Bool? = nil, awaitSite: String? = nil, awaitingFunction: String? = nil
            ) {
                self.id = id
                self.name = name
                self.state = state
                self.waitKind = waitKind
                self.suspendedMs = suspendedMs
                self.ageIsUpperBound = ageIsUpperBound
                self.awaitSite = awaitSite
                self.awaitingFunction = awaitingFunction
            }
        }

        enum CodingKeys: String, CodingKey {
            case waitKind, waitAddress, chain, chainEnd, suspendedSince, ageIsUpperBound, awaitSite, awaitingFunction
            case awaitedBy, firstSeen, runs, foldedTaskIds
        }

        package init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            waitKind = try c.decode(String.self, forKey: .waitKind)
            waitAddress = try c.decodeHexAddressIfPresent(forKey: .waitAddress)
            chain = try c.decode([ChainLink].self, forKey: .chain)
            chainEnd = try c.decodeIfPresent(String.self, forKey: .chainEnd)
            suspendedSince = try c.decode(Date.self, forKey: .suspendedSince)
            ageIsUpperBound = try c.decode(Bool.self, forKey: .ageIsUpperBound)
            awaitSite = try c.decodeIfPresent(String.self, forKey: .awaitSite)
            awaitingFunction = try c.decodeIfPresent(String.self, forKey: .awaitingFunction)
            awaitedBy = try c.decodeIfPresent([TaskReference].self, forKey: .awaitedBy)
            firstSeen = try c.decode(Date.self, forKey: .firstSeen)
            runs = try c.decode(Int.self, forKey: .runs)
            foldedTaskIds = try c.decodeIfPresent([UInt64].self, forKey: .foldedTaskIds)
        }

        package func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(waitKind, forKey: .waitKind)
            try c.encodeHexAddressIfPresent(waitAddress, forKey: .waitAddress)
            try c.encode(chain, forKey: .chain)
            try c.encodeIfPresent(chainEnd, forKey: .chainEnd)
            try c.encode(suspendedSince, forKey: .suspendedSince)
            try c.encode(ageIsUpperBound, forKey: .ageIsUpperBound)
            try c.encodeIfPresent(awaitSite, forKey: .awaitSite)
            try c.encodeIfPresent(awaitingFunction, forKey: .awaitingFunction)
            try c.encodeIfPresent(awaitedBy, forKey: .awaitedBy)
            try c.encode(firstSeen, forKey: .firstSeen)
            try c.encode(runs, forKey: .runs)
            try c.encodeIfPresent(foldedTaskIds, forKey: .foldedTaskIds)
        }
    }
}

extension ReportValidator {
    func hungAwait(_ hung: StallReport.HungAwaitDescription) throws(Failure) {
        try string("hungAwait.waitKind", hung.waitKind)
        if let end = hung.chainEnd { try string("hungAwait.chainEnd", end) }
        try date("hungAwait.suspendedSince", hung.suspendedSince)
        try date("hungAwait.firstSeen", hung.firstSeen)
        try count("hungAwait.runs", hung.runs)
        if let site = hung.awaitSite { try string("hungAwait.awaitSite", site) }
        if let function = hung.awaitingFunction { try string("hungAwait.awaitingFunction", function) }
        guard hung.chain.count <= 64 else {
            throw Failure(field: "hungAwait.chain", value: "\(hung.chain.count) links", rule: "at most 64 links")
        }
        for (index, link) in hung.chain.enumerated() {
            let field = "hungAwait.chain[\(index)]"
            try string(field + ".state", link.state)
            if let name = link.name { try string(field + ".name", name) }
            if let kind = link.waitKind { try string(field + ".waitKind", kind) }
            if let ms = link.suspendedMs { try milliseconds(field + ".suspendedMs", ms, signed: false) }
            if let site = link.awaitSite { try string(field + ".awaitSite", site) }
            if let function = link.awaitingFunction { try string(field + ".awaitingFunction", function) }
        }
        for (index, waiter) in (hung.awaitedBy ?? []).enumerated() {
            if let name = waiter.name { try string("hungAwait.awaitedBy[\(index)].name", name) }
            if let via = waiter.via { try string("hungAwait.awaitedBy[\(index)].via", via) }
        }
        if let folded = hung.foldedTaskIds, folded.count > 4096 {
            throw Failure(field: "hungAwait.foldedTaskIds", value: "\(folded.count) ids", rule: "at most 4096 ids")
        }
    }
}

extension DetectionSource {
    /// The Concurrency watchdog's task table: a task suspended past `hungAwaitThresholdMs`.
    public static let concurrencyTasks: DetectionSource = "concurrency-tasks"
}
