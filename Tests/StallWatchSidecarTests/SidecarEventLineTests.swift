// The sidecar's own events go through the one event-line encoder, with the keys log shippers index.
import StallWatch
import StallWatchSidecar
import StallWatchTestSupport
import Testing

@Suite(.offPool) struct SidecarEventLineTests {
    func line(_ event: SidecarEvent) -> String? { event.lineFields.map(JSONLinesEventWriter.encode) }

    @Test func sidecarEventsAreFlatSortedLines() {
        #expect(
            line(.watching(pid: 42, threadID: 43, source: "heartbeat", thresholdMs: 250))
                == #"{"event":"watching","pid":42,"source":"heartbeat","threadId":43,"thresholdMs":250}"#)
        #expect(line(.targetExited(pid: 42)) == #"{"event":"targetExited","pid":42}"#)
        #expect(
            line(.heartbeatRejected(SidecarError(.invalidHeartbeat, "heartbeat x: magic: \"bad\"")))
                == #"{"error":"heartbeat x: magic: \"bad\"","event":"heartbeatRejected"}"#)
        #expect(line(.stall(.lateWakeup(delayMs: 80))) == #"{"delayMs":80,"event":"lateWakeup"}"#)
        #expect(line(.stall(.sampled(reportID: "x", index: 0, pauseMicros: 1))) == nil)
    }

    @Test func daemonEventsUseTheSameEncoder() {
        let stale = SidecarDaemon.Event.removedStale(path: "/dev/shm/stallwatch.7", pid: 7)
        #expect(
            stale.lineFields.map(JSONLinesEventWriter.encode)
                == #"{"event":"removedStale","path":"/dev/shm/stallwatch.7","pid":7}"#)
        let target = SidecarDaemon.Event.target(pid: 7, .targetExited(pid: 7))
        #expect(target.lineFields.map(JSONLinesEventWriter.encode) == #"{"event":"targetExited","pid":7}"#)
    }
}
