// PoolCounters: the pool watchdog's stall counts, for the metrics.
import Synchronization

/// Process-wide counts of what the pool watchdog reported (a worker's slow job, sampled or not, a saturation).
enum PoolCounters {
    static let slowJobs = Atomic<UInt64>(0)
    static let saturations = Atomic<UInt64>(0)
    /// Slow jobs reported late, without samples: they returned before the watchdog looked at their worker.
    static let unsampledJobs = Atomic<UInt64>(0)

    /// Wraps `emit` so that every stall that begins is counted as a slow job, or as a saturation.
    static func counting(
        saturation: Bool, _ emit: @escaping @Sendable (StallEvent) -> Void
    ) -> @Sendable (StallEvent) -> Void {
        { event in
            if case .began = event {
                if saturation {
                    saturations.add(1, ordering: .relaxed)
                } else {
                    slowJobs.add(1, ordering: .relaxed)
                }
            }
            emit(event)
        }
    }
}
