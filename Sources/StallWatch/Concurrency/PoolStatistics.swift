// PoolStatistics: the Concurrency pool's job counters and histograms, summed over its workers.
import CStallWatchConcurrency

/// Jobs timed by the ``ConcurrencyWatchdog`` since the process started: how many, how long they ran, how long
/// they waited to start. Histogram buckets are cumulative-free counts per upper bound.
package struct PoolStatistics: Sendable, Equatable {
    /// Upper bounds of the histogram buckets, seconds; the last bucket has none (+Inf).
    static let bucketBounds: [Double] = [0.0001, 0.001, 0.01, 0.1, 1, 10]

    var jobsEnqueued: UInt64
    var jobsStarted: UInt64
    /// Jobs that ran without timing (more workers than slots).
    var jobsUntimed: UInt64
    /// Jobs per duration bucket (``bucketBounds``, then +Inf) and their total, seconds.
    var durationCounts: [UInt64]
    var durationSumSeconds: Double
    /// Jobs per enqueue-to-start delay bucket and their total, seconds.
    var delayCounts: [UInt64]
    var delaySumSeconds: Double

    static func read() -> PoolStatistics {
        var totals = sw_pool_totals()
        sw_pool_read_totals(&totals)
        let durations = withUnsafeBytes(of: totals.duration_buckets) { Array($0.bindMemory(to: UInt64.self)) }
        let delays = withUnsafeBytes(of: totals.delay_buckets) { Array($0.bindMemory(to: UInt64.self)) }
        return PoolStatistics(
            jobsEnqueued: totals.jobs_enqueued, jobsStarted: totals.jobs_started, jobsUntimed: totals.jobs_untimed,
            durationCounts: durations, durationSumSeconds: Double(totals.duration_sum_ns) / 1e9,
            delayCounts: delays, delaySumSeconds: Double(totals.delay_sum_ns) / 1e9)
    }

    /// Jobs that ran longer than `seconds` (from the duration histogram, at bucket resolution).
    func jobsLongerThan(bucketIndex: Int) -> UInt64 {
        durationCounts.dropFirst(bucketIndex + 1).reduce(0, +)
    }
}
