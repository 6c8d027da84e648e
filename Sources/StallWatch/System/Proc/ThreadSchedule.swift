// ThreadSchedule: a thread's CPU time and run-queue wait (schedstat) at one moment.

/// A thread's CPU time and run-queue wait (schedstat) at one moment: the baseline a stall's starvation verdict
/// measures from.
package struct ThreadSchedule: Sendable, Equatable {
    package var cpuNanos: UInt64
    package var runQueueWaitNanos: UInt64
    /// When it was read (CLOCK_MONOTONIC).
    package var monotonicNanos: UInt64

    package init(cpuNanos: UInt64, runQueueWaitNanos: UInt64, monotonicNanos: UInt64) {
        self.cpuNanos = cpuNanos
        self.runQueueWaitNanos = runQueueWaitNanos
        self.monotonicNanos = monotonicNanos
    }
}
