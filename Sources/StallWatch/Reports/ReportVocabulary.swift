// DetectionSource and CaptureMethod: how a stall was seen and how its stacks were taken, typed until encoded.

/// How a stall was detected, the report's `detection.source`. Typed from the watcher that sets it up to the
/// report, and a string only in the report's JSON; extensible (a struct, not an enum), so a report written by
/// another version with a source this one does not know still reads.
public struct DetectionSource: RawRepresentable, Hashable, Sendable, Codable, ExpressibleByStringLiteral,
    CustomStringConvertible
{
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(stringLiteral value: String) { rawValue = value }
    public var description: String { rawValue }

    /// The embedded watchdog, reading the loop's own published words.
    public static let inProcess: DetectionSource = "in-process"
    /// A sidecar reading the loop's heartbeat segment.
    public static let heartbeat: DetectionSource = "heartbeat"
    /// From /proc evidence, without instrumentation (the sidecar, the thread watchdog).
    public static let proc: DetectionSource = "proc"
    /// The Concurrency pool watchdog, reading the workers' job slots.
    public static let concurrencyPool: DetectionSource = "concurrency-pool"
}

/// How a report's stack samples were taken, its `capture.method`; typed and extensible like ``DetectionSource``.
package struct CaptureMethod: RawRepresentable, Hashable, Sendable, Codable, ExpressibleByStringLiteral,
    CustomStringConvertible
{
    package let rawValue: String
    package init(rawValue: String) { self.rawValue = rawValue }
    package init(stringLiteral value: String) { rawValue = value }
    package var description: String { rawValue }

    /// In-process, by a real-time signal whose handler copies the stack.
    package static let signal: CaptureMethod = "signal"
    /// In-process, by the non-interrupting capture helper (a ptrace stop of this process's thread).
    static let ptraceHelper: CaptureMethod = "ptrace-helper"
    /// From a sidecar, by ptrace.
    package static let ptrace: CaptureMethod = "ptrace"
    /// No sampler could be set up: samples carry no frames.
    package static let none: CaptureMethod = "none"
}
