// The activities a loop reports to its observers, in CFRunLoop's order and bit values.
import CStallWatchCore

/// A set of loop activities, with CFRunLoopActivity's bit values so masks read the same.
public struct LoopActivity: OptionSet, Sendable, Hashable, CustomStringConvertible {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    /// The loop started running (once per `run`).
    public static let entry = LoopActivity(rawValue: 1 << 0)
    /// About to fire due timers.
    public static let beforeTimers = LoopActivity(rawValue: 1 << 1)
    /// About to run performed blocks and ready sources.
    public static let beforeSources = LoopActivity(rawValue: 1 << 2)
    /// About to wait for work (idle).
    public static let beforeWaiting = LoopActivity(rawValue: 1 << 5)
    /// Woke from the idle wait; about to handle what woke it.
    public static let afterWaiting = LoopActivity(rawValue: 1 << 6)
    /// The loop stopped running.
    public static let exit = LoopActivity(rawValue: 1 << 7)

    public static let allActivities: LoopActivity = [
        .entry, .beforeTimers, .beforeSources, .beforeWaiting, .afterWaiting, .exit,
    ]

    /// The single activity's name as reports spell it (`beforeSources`), or a `|`-joined list for a set.
    public var description: String {
        let names: [(LoopActivity, String)] = [
            (.entry, "entry"), (.beforeTimers, "beforeTimers"), (.beforeSources, "beforeSources"),
            (.beforeWaiting, "beforeWaiting"), (.afterWaiting, "afterWaiting"), (.exit, "exit"),
        ]
        let parts = names.filter { contains($0.0) }.map(\.1)
        return parts.isEmpty ? "notRunning" : parts.joined(separator: "|")
    }

    /// The phase code stored in the loop-state word: the activity's bit position plus one (0 = not running).
    package var phaseCode: UInt32 { rawValue == 0 ? 0 : UInt32(rawValue.trailingZeroBitCount) + 1 }

    /// The activity for a phase code read from a loop-state word; empty for "not running" or an unknown code.
    package init(phaseCode: UInt32) {
        self = phaseCode == 0 || phaseCode > 8 ? [] : LoopActivity(rawValue: 1 << (phaseCode - 1))
    }

    /// A busy phase: the loop is running code, so staying here past the threshold is a stall.
    package var isBusy: Bool { sw_phase_is_busy(phaseCode) != 0 }
}
