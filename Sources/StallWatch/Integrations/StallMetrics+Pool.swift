// The Concurrency pool's part of the Prometheus exposition: job counts, durations, start delays, stalls.

extension StallMetrics {
    /// Appends the pool's families once the ``ConcurrencyWatchdog`` has timed a job:
    ///
    /// | metric | type |
    /// |---|---|
    /// | `stallwatch_pool_jobs_total` | counter (jobs started) |
    /// | `stallwatch_pool_job_duration_seconds` | histogram |
    /// | `stallwatch_pool_job_delay_seconds` | histogram (enqueue to start) |
    /// | `stallwatch_pool_slow_jobs_total` | counter (jobs reported as a stall of their worker) |
    /// | `stallwatch_pool_unsampled_jobs_total` | counter (of those, reported late without samples) |
    /// | `stallwatch_pool_saturations_total` | counter (every worker stuck while jobs waited) |
    func appendPool(to out: inout PrometheusText) {
        let statistics = ConcurrencyWatchdog.statistics
        guard statistics.jobsStarted > 0 || ConcurrencyWatchdog.isEnabled else { return }
        out.family("stallwatch_pool_jobs_total", "counter", "Swift Concurrency pool jobs started while timed.")
        out.sample("stallwatch_pool_jobs_total", [:], statistics.jobsStarted)
        out.family("stallwatch_pool_job_duration_seconds", "histogram", "How long each pool job ran.")
        Self.histogram(
            "stallwatch_pool_job_duration_seconds", statistics.durationCounts, statistics.durationSumSeconds, &out)
        out.family(
            "stallwatch_pool_job_delay_seconds", "histogram", "How long each pool job waited between enqueue and start."
        )
        Self.histogram("stallwatch_pool_job_delay_seconds", statistics.delayCounts, statistics.delaySumSeconds, &out)
        out.family(
            "stallwatch_pool_slow_jobs_total", "counter", "Pool jobs that ran past the threshold without suspending.")
        out.sample("stallwatch_pool_slow_jobs_total", [:], PoolCounters.slowJobs.load(ordering: .relaxed))
        out.family(
            "stallwatch_pool_unsampled_jobs_total", "counter",
            "Slow pool jobs reported late without samples: they returned before the pool watchdog looked at them.")
        out.sample("stallwatch_pool_unsampled_jobs_total", [:], PoolCounters.unsampledJobs.load(ordering: .relaxed))
        out.family(
            "stallwatch_pool_saturations_total", "counter",
            "Times every pool worker was stuck in a job while other jobs waited.")
        out.sample("stallwatch_pool_saturations_total", [:], PoolCounters.saturations.load(ordering: .relaxed))
    }

    private static func histogram(_ name: String, _ counts: [UInt64], _ sum: Double, _ out: inout PrometheusText) {
        var running: UInt64 = 0
        for (index, bound) in PoolStatistics.bucketBounds.enumerated() {
            running += index < counts.count ? counts[index] : 0
            out.sample(name + "_bucket", ["le": PrometheusText.format(bound)], running)
        }
        let total = counts.reduce(0, +)
        out.sample(name + "_bucket", ["le": "+Inf"], total)
        out.sample(name + "_sum", [:], sum)
        out.sample(name + "_count", [:], total)
    }
}
