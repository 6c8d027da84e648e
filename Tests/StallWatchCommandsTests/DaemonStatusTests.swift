// The daemon's STATUS= line: stalls counted per loop thread, so several loops of one process stall at once.
import Foundation
import StallWatch
import StallWatchTestSupport
import Testing

@testable import StallWatchCommands

@Suite(.offPool) struct DaemonStatusTests {
    /// A report of a stall of loop thread `tid` of process `pid`.
    static func report(pid: Int32, tid: Int32, id: String) -> StallReport {
        let start = Date(timeIntervalSince1970: 1_790_000_000)
        return StallReport(
            id: id, status: .ongoing, severity: .stall, startedAt: start, endedAt: nil, durationMs: 300,
            detection: .init(
                source: "proc", strategy: .deadline, thresholdMs: 250, hangThresholdMs: 5000,
                detectedAt: start.addingTimeInterval(0.251), latencyMs: 1),
            process: .init(pid: pid, executable: "/usr/bin/service", buildId: nil, host: "test"),
            loop: .init(name: "NIO-ELT-0-#\(tid)", threadId: tid, phase: "unknown", iteration: 1),
            samples: [], images: [], signature: "abc",
            capture: .init(method: "ptrace", sampleIntervalMs: 50, samplesTaken: 0))
    }

    @Test func twoLoopThreadsOfOneProcessStalledAtOnceStayStalledUntilBothEnd() {
        var status = DaemonStatus()
        status.watched = 2
        let first = Self.report(pid: 100, tid: 101, id: "a")
        let second = Self.report(pid: 100, tid: 102, id: "b")
        status.observe(pid: 100, .began(first))
        status.observe(pid: 100, .began(second))
        #expect(status.stalled.count == 2 && status.stalledProcesses == 1)
        #expect(
            status.line(directory: "/run/stallwatch", stuck: []).contains("stalled now: pid 100 (threads 101, 102)"))
        // One thread's stall ends: the other is still going on.
        status.observe(pid: 100, .ended(first))
        #expect(status.stalled.count == 1 && status.stalledProcesses == 1)
        let line = status.line(directory: "/run/stallwatch", stuck: [])
        #expect(line.contains("stalled now: pid 100 (thread 102); 1 stall reported"), "\(line)")
        status.observe(pid: 100, .ended(second))
        #expect(status.stalled.isEmpty && status.stalledProcesses == 0)
        #expect(
            status.line(directory: "/run/stallwatch", stuck: [])
                == "watching 2 processes in /run/stallwatch; 2 stalls reported")
    }

    @Test func aProcessWhoseMainThreadStallsIsNamedAloneNextToOthers() {
        var status = DaemonStatus()
        status.watched = 2
        status.observe(pid: 300, .began(Self.report(pid: 300, tid: 301, id: "c")))
        status.observe(pid: 200, .began(Self.report(pid: 200, tid: 200, id: "d")))
        #expect(status.stalledProcesses == 2)
        #expect(
            status.line(directory: "/run/stallwatch", stuck: [300])
                == "watching 2 processes in /run/stallwatch; stalled now: pid 200, pid 300 (thread 301); 0 stalls "
                + "reported; unhealthy: the watcher of pid 300 stopped turning, watchdog pings paused")
    }
}
