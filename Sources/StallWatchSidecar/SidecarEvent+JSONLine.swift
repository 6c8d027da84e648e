// The JSON lines of a sidecar's events, through the one event-line encoder (JSONLinesEventWriter).
import StallWatch

extension SidecarEvent {
    /// The event's line fields (``JSONLinesEventWriter/encode(_:)`` turns them into the line); nil for events
    /// that are not written (samples).
    ///
    /// Keys, besides the stall events' (``JSONLinesEventWriter``):
    /// - `watching`: `event`, `pid`, `threadId`, `source` (`heartbeat` or `proc`), `thresholdMs`
    /// - `heartbeatRejected`: `event`, `error`; `targetExited`: `event`, `pid`
    /// - `threadDropped`: `event`, `pid`, `threadId`, `reason`
    /// - `lockWaitTakenAsIdle`: `event`, `pid`, `threadId`, `call`, `blockedForAtLeastMs` (when read)
    package var lineFields: [String: JSONLinesEventWriter.Value]? {
        switch self {
        case .watching(let pid, let tid, let source, let threshold):
            [
                "event": .string("watching"), "pid": .int(Int(pid)), "threadId": .int(Int(tid)),
                "source": .string(source.rawValue), "thresholdMs": .int(threshold),
            ]
        case .heartbeatRejected(let error): ["event": .string("heartbeatRejected"), "error": .string(error.message)]
        case .targetExited(let pid): ["event": .string("targetExited"), "pid": .int(Int(pid))]
        case .threadDropped(let pid, let tid, let reason):
            [
                "event": .string("threadDropped"), "pid": .int(Int(pid)), "threadId": .int(Int(tid)),
                "reason": .string(reason),
            ]
        case .lockWaitTakenAsIdle(let pid, let tid, let call, let blocked):
            [
                "event": .string("lockWaitTakenAsIdle"), "pid": .int(Int(pid)), "threadId": .int(Int(tid)),
                "call": .string(call),
            ].merging(blocked.map { ["blockedForAtLeastMs": .double($0)] } ?? [:]) { a, _ in a }
        case .stall(let event): JSONLinesEventWriter.fields(for: event)
        }
    }
}

extension SidecarDaemon.Event {
    /// The event's line fields; a target's events are those of ``SidecarEvent/lineFields``.
    ///
    /// Keys: `skipped`: `event`, `path`, `error`; `removedStale`: `event`, `path`, `pid`.
    package var lineFields: [String: JSONLinesEventWriter.Value]? {
        switch self {
        case .skipped(let path, let error):
            ["event": .string("skipped"), "path": .string(path), "error": .string(error.message)]
        case .removedStale(let path, let pid):
            ["event": .string("removedStale"), "path": .string(path), "pid": .int(Int(pid))]
        case .target(_, let event): event.lineFields
        }
    }
}
