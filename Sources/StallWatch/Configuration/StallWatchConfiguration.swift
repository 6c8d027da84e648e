// Every StallWatch setting with its default, range and documentation.
import CStallWatchSignal
import Foundation

/// Settings of an embedded watchdog (and of the sidecar). Defaults match `Config/stallwatch.json`.
///
/// Load with ``load(file:environment:)``: a JSON file of the same keys, then `STALLWATCH_<KEY>` environment
/// overrides (`thresholdMs` → `STALLWATCH_THRESHOLD_MS`). Every value is checked; an invalid one is rejected with
/// a message naming where it came from, the key, the value and what is allowed.
public struct StallWatchConfiguration: Sendable, Equatable {
    /// Off: the watchdog does not start (the loop still runs).
    public var enabled = true
    /// A busy phase longer than this is a stall.
    public var thresholdMs = 250
    /// A stall longer than this is a hang.
    public var hangThresholdMs = 5000
    /// Time between stack samples while a stall lasts.
    public var sampleIntervalMs = 50
    /// Samples kept per stall (the first `maxSamples` are taken; later ones are skipped).
    public var maxSamples = 100
    /// Frames kept per sample.
    public var maxFrames = 128
    /// Bytes of the loop thread's stack copied per sample, from SP up (in-process by the signal handler, into a
    /// slot of ``maxStackBytesLimit`` bytes; by the sidecar with `process_vm_readv`).
    public var maxStackBytes = 65536
    /// How long to wait for the sampled thread's signal handler.
    public var captureTimeoutMs = 100
    /// `deadline` (default) or `classic` (signal per transition, N consecutive timeouts).
    public var strategy = DetectionStrategy.deadline
    /// Timed-out checks in a row that make a stall with the classic strategy.
    public var classicConsecutiveTimeouts = 5
    /// A watchdog waking later than this is not trusted to judge the loop.
    public var lateWakeupToleranceMs = 50
    /// `full` (names + file:line), `fast` (names) or `off` (image + offset).
    public var symbolication = SymbolicationMode.full
    /// Where reports are written; empty for `$STALLWATCH_REPORT_DIRECTORY` or `/var/tmp/stallwatch-<uid>`
    /// (resolved by ``reportDirectoryPath``).
    public var reportDirectory = ""
    /// Reports kept in the directory; the oldest are removed.
    public var maxReports = 200
    /// The name in reports, events and the heartbeat of a loop created without a name of its own (one still
    /// named ``defaultLoopName``); a loop given another name keeps it. See ``name(of:)``.
    public var loopName = StallWatchConfiguration.defaultLoopName
    /// A stall with the same signature and cause as one reported this recently is folded into that report.
    public var dedupWindowMs = 600_000
    /// New report files per rolling hour; later stalls are counted, not written.
    public var maxReportsPerHour = 60
    /// Threads captured in the all-threads snapshot on a stall's first sample.
    public var maxThreads = 64
    /// Frames kept per thread in that snapshot.
    public var maxThreadFrames = 32
    /// Publish the loop's state in a heartbeat segment that `stallwatch watch`/`daemon` can read.
    public var heartbeat = true
    /// Where heartbeat segments are created; empty for `/dev/shm` (resolved by ``heartbeatDirectoryPath``).
    public var heartbeatDirectory = ""
    /// A shell glob of thread names (`NIO-ELT-*`) for ``ThreadWatchdog``: threads of this process watched from
    /// /proc evidence, one detector each; empty: none.
    public var watchThreads = ""
    /// Record the lead-up of a watched ``EventLoop`` (its last seconds: buckets of loop time, long items) for
    /// the `leadUp` section of every stall report.
    public var leadUp = true
    /// How far back the lead-up reaches.
    public var leadUpWindowMs = 10_000
    /// The width of one lead-up bucket.
    public var leadUpBucketMs = 100
    /// Items of loop work at least this long are kept one by one (with their label and queue delay).
    public var leadUpItemMs = 1
    /// How the lead-up records the loop thread's stacks, so that its long items show where they ran: `auto` (a
    /// kernel-kept perf ring where allowed, else StallWatch's sampler), `sampler` or `off`.
    public var leadUpStacks = LeadUpStackMode.auto
    /// Tasks the task table of ``ConcurrencyWatchdog`` holds at once; more are counted, not tabled. 0 (the default:
    /// the table costs more than its 2 % bar on a Concurrency-heavy workload, `scripts/bench.sh tasks`): no table.
    public var maxTasks = 0
    /// A Swift task suspended longer than this, and not exempt, is a hung await: ``ConcurrencyWatchdog`` writes a
    /// report with cause `hungAwait` (it needs the task table: `maxTasks` above 0). 0: off.
    public var hungAwaitThresholdMs = 10_000
    /// Await sites that are never hung awaits, comma-separated: a pattern (`*` matches any text) matches a frame of
    /// the task's async backtrace by name; `default` stands for ``defaultHungAwaitExemptions``.
    public var hungAwaitExemptions = "default"

    public init() {}

    /// What `default` stands for in ``hungAwaitExemptions``: `Task.sleep` (and clocks' `sleep`), a consumer of an
    /// `AsyncStream` or `AsyncThrowingStream` waiting for its next element, and the inbound stream of a SwiftNIO
    /// async channel (an accept loop, a connection waiting for its next request).
    public static let defaultHungAwaitExemptions = [
        "Task.sleep", "Task._sleep", "Clock.sleep", "AsyncStream.Iterator.next", "AsyncStream._Storage.next",
        "AsyncThrowingStream.Iterator.next", "AsyncThrowingStream._Storage.next",
        "NIOAsyncSequenceProducer.AsyncIterator.next", "NIOThrowingAsyncSequenceProducer.AsyncIterator.next",
    ]

    /// The most `maxStackBytes` may be: the size of the in-process capture slot, preallocated per request when
    /// the signal handler is installed (`SW_CAPTURE_DEFAULT_STACK_BYTES`).
    static let maxStackBytesLimit = Int(SW_CAPTURE_DEFAULT_STACK_BYTES)

    /// The name loops and adapters take when none is given (`EventLoop(name:)` and the others default to it).
    public static let defaultLoopName = "main"
}

extension StallWatchConfiguration {
    /// One setting: its JSON key, what values it takes, and how to store it.
    struct Key: Sendable {
        package enum Kind: Sendable {
            case integer(ClosedRange<Int>, WritableKeyPath<StallWatchConfiguration, Int> & Sendable)
            /// One of `values`; `get` renders the current value, `set` stores a valid one (false: not allowed).
            case choice(
                [String], get: @Sendable (StallWatchConfiguration) -> String,
                set: @Sendable (inout StallWatchConfiguration, String) -> Bool)
            case text(WritableKeyPath<StallWatchConfiguration, String> & Sendable)
            case flag(WritableKeyPath<StallWatchConfiguration, Bool> & Sendable)
        }

        var name: String
        var kind: Kind
        /// Why the allowed values are what they are, when that is not obvious.
        var reason: String? = nil

        /// `thresholdMs` → `STALLWATCH_THRESHOLD_MS`.
        var environmentName: String {
            var out = "STALLWATCH_"
            for ch in name {
                if ch.isUppercase { out.append("_") }
                out.append(contentsOf: ch.uppercased())
            }
            return out
        }

        var allowed: String {
            guard let reason else { return values }
            return values + " (" + reason + ")"
        }

        private var values: String {
            switch kind {
            case .integer(let range, _): return "an integer from \(range.lowerBound) to \(range.upperBound)"
            case .choice(let values, _, _): return "one of " + values.map { "\"\($0)\"" }.joined(separator: ", ")
            case .text: return "a string"
            case .flag: return "true or false"
            }
        }
    }

    /// A `.choice` key over the raw values of an enum.
    static func choice<Value: RawRepresentable & CaseIterable & SendableMetatype>(
        _ path: WritableKeyPath<StallWatchConfiguration, Value> & Sendable
    ) -> Key.Kind where Value.RawValue == String {
        .choice(
            Value.allCases.map(\.rawValue), get: { $0[keyPath: path].rawValue },
            set: { config, text in
                guard let value = Value(rawValue: text) else { return false }
                config[keyPath: path] = value
                return true
            })
    }

    static let keys: [Key] = [
        Key(name: "enabled", kind: .flag(\.enabled)),
        Key(name: "thresholdMs", kind: .integer(10...600_000, \.thresholdMs)),
        Key(name: "hangThresholdMs", kind: .integer(10...3_600_000, \.hangThresholdMs)),
        Key(name: "sampleIntervalMs", kind: .integer(1...60_000, \.sampleIntervalMs)),
        Key(name: "maxSamples", kind: .integer(1...10_000, \.maxSamples)),
        Key(name: "maxFrames", kind: .integer(4...1024, \.maxFrames)),
        Key(
            name: "maxStackBytes", kind: .integer(4096...maxStackBytesLimit, \.maxStackBytes),
            reason: "the in-process capture slot holds \(maxStackBytesLimit) bytes"),
        Key(name: "captureTimeoutMs", kind: .integer(1...10_000, \.captureTimeoutMs)),
        Key(name: "strategy", kind: choice(\.strategy)),
        Key(name: "classicConsecutiveTimeouts", kind: .integer(1...100, \.classicConsecutiveTimeouts)),
        Key(name: "lateWakeupToleranceMs", kind: .integer(1...60_000, \.lateWakeupToleranceMs)),
        Key(name: "symbolication", kind: choice(\.symbolication)),
        Key(name: "reportDirectory", kind: .text(\.reportDirectory)),
        Key(name: "maxReports", kind: .integer(1...100_000, \.maxReports)),
        Key(name: "loopName", kind: .text(\.loopName)),
        Key(name: "dedupWindowMs", kind: .integer(0...86_400_000, \.dedupWindowMs)),
        Key(name: "maxReportsPerHour", kind: .integer(1...100_000, \.maxReportsPerHour)),
        Key(name: "maxThreads", kind: .integer(0...4096, \.maxThreads)),
        Key(name: "maxThreadFrames", kind: .integer(1...1024, \.maxThreadFrames)),
        Key(name: "heartbeat", kind: .flag(\.heartbeat)),
        Key(name: "heartbeatDirectory", kind: .text(\.heartbeatDirectory)),
        Key(name: "watchThreads", kind: .text(\.watchThreads)),
        Key(name: "leadUp", kind: .flag(\.leadUp)),
        Key(name: "leadUpWindowMs", kind: .integer(100...600_000, \.leadUpWindowMs)),
        Key(name: "leadUpBucketMs", kind: .integer(10...60_000, \.leadUpBucketMs)),
        Key(name: "leadUpItemMs", kind: .integer(1...60_000, \.leadUpItemMs)),
        Key(name: "leadUpStacks", kind: choice(\.leadUpStacks)),
        Key(name: "maxTasks", kind: .integer(0...4_000_000, \.maxTasks)),
        Key(name: "hungAwaitThresholdMs", kind: .integer(0...86_400_000, \.hungAwaitThresholdMs)),
        Key(name: "hungAwaitExemptions", kind: .text(\.hungAwaitExemptions)),
    ]
}
