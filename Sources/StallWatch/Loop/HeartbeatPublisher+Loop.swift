// Publishing a loop's state in a heartbeat segment: the segment is made for the loop, which moves its words in.

extension HeartbeatPublisher {
    /// Creates the segment for `loop` and moves the loop's published state into it.
    ///
    /// Call it before the loop runs (``Watchdog/start()`` does when `configuration.heartbeat` is on).
    ///
    /// - Parameters:
    ///   - loop: The loop whose state is published.
    ///   - configuration: `heartbeatDirectory`, the thresholds and the loop's name (``StallWatchConfiguration/name(of:)``)
    ///     are written to the header.
    /// - Returns: The publisher; the loop keeps it (and the mapping) alive for as long as it uses the segment.
    /// - Throws: `.systemCall` naming the call and path when the file cannot be created; `.invalidState` when
    ///   the loop is already running or already watched.
    @discardableResult
    public static func publish(loop: any WatchedLoop, configuration: StallWatchConfiguration) throws(StallWatchError)
        -> HeartbeatPublisher
    {
        try publish(loop: loop, configuration: configuration, watchdogStarting: false)
    }

    static func publish(loop: any WatchedLoop, configuration: StallWatchConfiguration, watchdogStarting: Bool)
        throws(StallWatchError) -> HeartbeatPublisher
    {
        let publisher = try HeartbeatPublisher(
            directory: configuration.heartbeatDirectoryPath,
            loopName: configuration.name(of: loop), thresholdNanos: configuration.intervals.threshold,
            hangThresholdNanos: configuration.intervals.hangThreshold)
        do {
            try loop.state.adopt(publisher, watchdogStarting: watchdogStarting)
        } catch {
            publisher.withdraw()
            throw error
        }
        return publisher
    }
}
