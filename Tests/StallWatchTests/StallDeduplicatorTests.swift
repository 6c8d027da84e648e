import StallWatchTestSupport
// Dedup and backoff on a fake clock: folding repeats, the hourly cap, the annealing of sampling.
import Testing

@testable import StallWatch

@Suite(.offPool) struct StallDeduplicatorTests {
    let second: UInt64 = 1_000_000_000

    @Test func repeatsWithinTheWindowFoldIntoTheFirstReport() {
        var dedup = StallDeduplicator(windowNanos: 600 * second, maxPerHour: 60)
        #expect(dedup.decide(signature: "aa", reportID: "r1", now: 0) == .writeNew)
        #expect(
            dedup.decide(signature: "aa", reportID: "r2", now: 10 * second) == .fold(reportID: "r1", occurrences: 2))
        #expect(dedup.decide(signature: "bb", reportID: "r3", now: 20 * second) == .writeNew)
        // The window runs from the last occurrence.
        #expect(
            dedup.decide(signature: "aa", reportID: "r4", now: 600 * second) == .fold(reportID: "r1", occurrences: 3))
        #expect(dedup.decide(signature: "aa", reportID: "r5", now: 1300 * second) == .writeNew)
    }

    /// The same innermost frames (a lock wrapper) with another cause — a deadlock, then a plain lock wait — are
    /// another stall: a report of its own, into which its own repeats then fold.
    @Test func aStallOfTheSameSignatureButAnotherCauseGetsAReportOfItsOwn() {
        var dedup = StallDeduplicator(windowNanos: 600 * second, maxPerHour: 60)
        #expect(dedup.decide(signature: "aa", reportID: "r1", now: 0, cause: "deadlock") == .writeNew)
        #expect(dedup.decide(signature: "aa", reportID: "r2", now: second, cause: "lock") == .writeNew)
        #expect(
            dedup.decide(signature: "aa", reportID: "r3", now: 2 * second, cause: "lock")
                == .fold(reportID: "r2", occurrences: 2))
    }

    @Test func stallsWithoutAStackAreNeverFolded() {
        var dedup = StallDeduplicator(windowNanos: 600 * second, maxPerHour: 60)
        #expect(dedup.decide(signature: "unknown", reportID: "r1", now: 0) == .writeNew)
        #expect(dedup.decide(signature: "unknown", reportID: "r2", now: second) == .writeNew)
    }

    @Test func newFilesAreCappedPerRollingHourAndTheRestCounted() {
        var dedup = StallDeduplicator(windowNanos: 0, maxPerHour: 3)
        for i in 0..<3 {
            #expect(dedup.decide(signature: "s\(i)", reportID: "r\(i)", now: UInt64(i) * second) == .writeNew)
        }
        #expect(dedup.decide(signature: "s3", reportID: "r3", now: 10 * second) == .suppress)
        #expect(dedup.decide(signature: "s4", reportID: "r4", now: 11 * second) == .suppress)
        #expect(dedup.takeSuppressed() == 2)
        #expect(dedup.takeSuppressed() == 0)
        // An hour after the first file, a slot frees up.
        #expect(dedup.decide(signature: "s5", reportID: "r5", now: 3601 * second) == .writeNew)
    }

    @Test func recurringSignaturesAreSampledLessOftenUpToEightTimes() {
        var dedup = StallDeduplicator(windowNanos: 600 * second, maxPerHour: 60)
        #expect(dedup.samplingScale(signature: "aa", now: 0) == 1)
        _ = dedup.decide(signature: "aa", reportID: "r1", now: 0)
        #expect(dedup.samplingScale(signature: "aa", now: second) == 2)
        _ = dedup.decide(signature: "aa", reportID: "r2", now: second)
        #expect(dedup.samplingScale(signature: "aa", now: 2 * second) == 4)
        for i in 3..<10 { _ = dedup.decide(signature: "aa", reportID: "r\(i)", now: UInt64(i) * second) }
        #expect(dedup.samplingScale(signature: "aa", now: 10 * second) == 8)
        #expect(dedup.samplingScale(signature: "aa", now: 2000 * second) == 1)
    }
}
