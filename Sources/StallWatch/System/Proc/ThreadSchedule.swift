// ThreadSchedule: a thread's CPU time and run-queue wait (schedstat) at one moment.

/// A thread's CPU time and run-queue wait (schedstat) at one moment: the baseline a stall's starvation verdict
/// measures from.
package struct ThreadSchedule: Sendable, Equatable {
    var cpuNanos: UInt64
    var runQueueWaitNanos: UInt64
    /// When it was read (CLOCK_MONOTONIC).
    var monotonicNanos: UInt64

    package init(cpuNanos: UInt64, runQueueWaitNanos: UInt64, monotonicNanos: UInt64) {
        self.cpuNanos = cpuNanos
        self.runQueueWaitNanos = runQueueWaitNanos
        self.monotonicNanos = monotonicNanos
    }

    /// Parses a `schedstat` file ("on-CPU ns, run-queue wait ns, timeslices") read at `monotonicNanos`.
    package init?(parsing text: String, monotonicNanos: UInt64) {
        let parts = text.split(separator: " ")
        guard parts.count >= 2, let cpu = UInt64(parts[0]), let wait = UInt64(parts[1]) else { return nil }
        self.init(cpuNanos: cpu, runQueueWaitNanos: wait, monotonicNanos: monotonicNanos)
    }
}
