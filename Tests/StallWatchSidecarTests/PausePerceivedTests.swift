// The pause a sidecar capture reports is the pause the target sees: never below the gap the target observed.
import CStallWatchPtrace
import Foundation
import StallWatch
import StallWatchSidecar
import StallWatchTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite(.offPool) struct PausePerceivedTests {
    /// `GAP start end` lines of the spinner's output.
    static func gaps(in output: String) -> [(start: UInt64, end: UInt64)] {
        output.split(separator: "\n").compactMap { line in
            let fields = line.split(separator: " ")
            guard fields.count == 3, fields[0] == "GAP", let start = UInt64(fields[1]), let end = UInt64(fields[2])
            else { return nil }
            return (start, end)
        }
    }

    @Test func theReportedPauseIsNeverBelowTheGapTheTargetObservedAcrossTheCapture() throws {
        let script = SidecarFixtures.fixturesDirectory.appendingPathComponent("clock_spinner.py").path
        let spinner = try Spawned("/usr/bin/env", ["python3", script, "20000"])
        try #require(spinner.waitFor("READY"), "the spinner did not start: \(spinner.stderr)")
        // The C capture PtraceSampler runs: its record also says when the detach happened.
        var captures: [(started: UInt64, detached: UInt64, pause: UInt64)] = []
        let stack = UnsafeMutablePointer<UInt8>.allocate(capacity: 256 << 10)
        defer { stack.deallocate() }
        for _ in 0..<20 {
            var record = sw_ptrace_record()
            var now = timespec()
            clock_gettime(CLOCK_MONOTONIC, &now)
            let started = UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
            let status = sw_ptrace_capture(spinner.pid, spinner.pid, 2_000_000_000, stack, 256 << 10, &record)
            #expect(status == 0 && record.stack_size > 0)
            if status == 0 { captures.append((started, record.detached_at_ns, record.seen_pause_ns)) }
            usleep(20_000)
        }
        // What PtraceSampler reports as the pause is that record's figure.
        let sampled = try PtraceSampler(processID: spinner.pid).capture(threadID: spinner.pid, maxStackBytes: 4096)
            .get()
        #expect(sampled.pauseNanoseconds > 0)
        try #require(!captures.isEmpty)
        // The gap of the last capture is printed once the spinner runs again: wait for its line.
        let lastDetach = captures[captures.count - 1].detached
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline, !Self.gaps(in: spinner.stdout).contains(where: { $0.end >= lastDetach }) {
            usleep(10_000)
        }
        kill(spinner.pid, SIGKILL)
        let gaps = Self.gaps(in: spinner.stdout)
        var compared: [(pause: UInt64, gap: UInt64)] = []
        for capture in captures {
            // The gap the stop made spans the detach (the target was stopped then). One that began before the
            // call (the target already waiting for a CPU someone else held) is not the capture's doing.
            let seen = gaps.filter { $0.start >= capture.started && $0.start <= capture.detached }
                .filter { $0.end >= capture.detached }.map { $0.end - $0.start }
            if let longest = seen.max() { compared.append((capture.pause, longest)) }
        }
        try #require(
            compared.count >= 3, "the spinner saw a gap for only \(compared.count) of \(captures.count) captures")
        // 100 µs of slack: the spinner is an interpreter (a loop turn between two clock reads, an allocation), and
        // on a virtual machine the host may hold the target's CPU a moment longer than its schedstat shows. On a
        // machine other work keeps busy, the target can also be preempted again after the capture saw it run;
        // that is not the capture's pause (seen when the whole suite runs on 2 CPUs, and in 3 of 8 captures with a
        // build running beside the suite), so some captures may exceed it: half must not. `scripts/bench.sh pause`
        // measures the same from the target's side on a quiet machine.
        let below = compared.filter { $0.pause + 100_000 < $0.gap }
        #expect(
            below.count * 2 <= compared.count,
            "reported pause below the target's gap in \(below.count) of \(compared.count) captures: \(below)")
    }
}
