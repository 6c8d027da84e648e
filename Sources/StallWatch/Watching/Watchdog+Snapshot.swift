// Snapshots on demand: the loop's lead-up written as a report without a stall, asked in-process or from outside.
import CStallWatchCore

extension Watchdog {
    /// Writes a report of what the loop ran in the last seconds (its lead-up), without a stall: status `snapshot`
    /// with `reason`, the loop as it is now, the lead-up's buckets, items and longest items up to this moment.
    ///
    /// For the moments a service knows something went wrong that was no stall ("this request was slow, what
    /// ran?"). The report is written like a stall's (same directory, same bounds) but is not one: no event is
    /// emitted, no metric counts it, it is never folded into another report.
    ///
    /// - Parameter reason: Why the snapshot was taken; kept in the report's `snapshotReason` (printable text).
    /// - Returns: The path of the report written.
    /// - Throws: `.invalidState` when the watchdog is not running; `.unsupported` when the loop records no lead-up
    ///   (`leadUp` is off, or the loop times no items: a ``MainQueueProbe``); `.report` or `.systemCall` when the report cannot be
    ///   written.
    /// - Warning: Returns once the report is written and synced (milliseconds; more on a busy disk). Called on the
    ///   loop thread, that time is loop time: call it from another thread where that matters.
    public func snapshot(reason: String) throws(StallWatchError) -> String {
        guard let parts = snapshotParts else {
            throw StallWatchError(.invalidState, "the watchdog of loop '\(loop.name)' is not running: no snapshot")
        }
        guard let leadUp = parts.leadUp else { throw Self.noLeadUp(loop.name) }
        return try parts.recorder.writeSnapshot(snapshotMoment(reason: reason, leadUp: leadUp))
    }

    /// The loop now, with its lead-up up to now.
    func snapshotMoment(reason: String, leadUp: LeadUpRecorder) -> StallRecorder.SnapshotMoment {
        let now = sw_monotonic_ns()
        let details = loop.sampled
        return StallRecorder.SnapshotMoment(
            reason: reason, leadUp: leadUp.capture(endingAt: now), threadID: details?.sampledThread?.threadID ?? 0,
            loop: loop.state.snapshot(), annotations: details?.annotations ?? [:], now: now,
            wallNanos: sw_realtime_ns())
    }

    static func noLeadUp(_ loopName: String) -> StallWatchError {
        StallWatchError(
            .unsupported,
            "loop '\(loopName)' records no lead-up (leadUp is off, or the loop times no items: a MainQueueProbe): no snapshot"
        )
    }
}

/// Serves the snapshot requests written into a watchdog's heartbeat segment from outside (`stallwatch snapshot`),
/// on the watchdog thread: each wake-up reads the request count (one atomic load); a new count has the report
/// built and written on the report queue, then answered. The watchdog does not wake for a request: it is served
/// at the next wake-up, which comes while the loop is busy (and on its next idle → busy edge).
///
/// At most one snapshot a second: another process of the same user cannot make it write reports without bound.
final class SnapshotRequestServer {
    private let heartbeat: HeartbeatPublisher
    private let recorder: StallRecorder
    private let leadUp: LeadUpRecorder?
    private let moment: (String, LeadUpRecorder) -> StallRecorder.SnapshotMoment
    /// The request count last served.
    private var served: UInt64 = 0
    private var nextAllowedAt: UInt64 = 0
    static let minimumIntervalNanos: UInt64 = 1_000_000_000
    static let reason = "requested from outside through the heartbeat segment (stallwatch snapshot)"

    init(
        heartbeat: HeartbeatPublisher, recorder: StallRecorder, leadUp: LeadUpRecorder?,
        moment: @escaping (String, LeadUpRecorder) -> StallRecorder.SnapshotMoment
    ) {
        self.heartbeat = heartbeat
        self.recorder = recorder
        self.leadUp = leadUp
        self.moment = moment
    }

    /// Serves a new request, if any and if the last one was served long enough ago.
    func poll(now: UInt64) {
        let requested = heartbeat.snapshotRequested
        guard requested != served, now >= nextAllowedAt else { return }
        served = requested
        nextAllowedAt = now &+ Self.minimumIntervalNanos
        guard let leadUp else {
            return heartbeat.answerSnapshot(
                count: requested, result: .failure(Watchdog.noLeadUp(recorder.builder.loopName)))
        }
        recorder.writeSnapshot(moment(Self.reason, leadUp)) { [heartbeat] result in
            heartbeat.answerSnapshot(count: requested, result: result)
        }
    }
}
