// The sidecar on a stripped C epoll service built -O2 -fomit-frame-pointer: no symbols of its own, no frame
// pointers, glibc's own locks and joins.
import Foundation
import StallWatchTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Stalls of `Fixtures/corpus/epoll_server.c`, compiled by the test with the system C compiler and stripped.
/// Slow: each case runs the service for about three seconds.
@Suite(.offPool, .serialized) struct CorpusNativeTests {
    /// The stripped binary, built once per test process.
    static let binary: String? = {
        let out = SidecarFixtures.temporaryDirectory("epoll-server") + "/epoll_server"
        let source = CorpusHarness.fixture("epoll_server.c")
        let build = Process()
        build.executableURL = URL(fileURLWithPath: "/bin/sh")
        build.arguments = ["-c", "cc -O2 -fomit-frame-pointer -pthread -o '\(out)' '\(source)' && strip '\(out)'"]
        guard (try? build.run()) != nil else { return nil }
        build.waitUntilExit()
        return build.terminationStatus == 0 ? out : nil
    }()

    static func server(_ mode: String, _ ms: String = "1000") -> [String] { [binary ?? "/nonexistent", mode, ms] }

    static let lockFrames = ["lll_lock_wait", "pthread_mutex", "futex", "timedlock"]

    static let cases: [CorpusCase] = [
        CorpusCase(name: "c idle epoll loop", command: server("idle"), expect: .noReport),
        CorpusCase(name: "c loop parked on a condition variable", command: server("condvar-idle"), expect: .noReport),
        CorpusCase(name: "c cpu", command: server("cpu"), expect: .stall(.cpu, frames: [])),
        CorpusCase(name: "c nested poll", command: server("nested-poll"), expect: .stall(.io, frames: ["poll"])),
        CorpusCase(
            name: "c mutex", command: server("mutex"),
            expect: .stall(.lock, frames: lockFrames, blocking: "lock-holder")),
        CorpusCase(
            name: "c timed mutex", command: server("timed-mutex"),
            expect: .stall(.lock, frames: lockFrames, blocking: "lock-holder")),
        CorpusCase(
            name: "c deadlock", command: server("deadlock"),
            expect: .stall(.deadlock, frames: lockFrames, blocking: "lock-holder", deadlock: true)),
        CorpusCase(name: "c join", command: server("join"), expect: .stall(.lock, frames: ["futex", "join"])),
        // A read-write lock held for writing: glibc records the writer in the lock.
        CorpusCase(
            name: "c read-write lock held by a writer", command: server("rwlock"),
            expect: .stall(.lock, frames: ["rwlock", "futex"], blocking: "table-writer")),
        // A SysV semaphore another process took: its last operator, the likely holder, is named.
        CorpusCase(
            name: "c sysv semaphore held by another process", command: server("sysv-sem"),
            expect: .stall(.lock, frames: ["semop", "semtimedop"]), evidenceContains: "likely the holder",
            blockingProcess: "sem-holder"),
        CorpusCase(
            name: "c mutex among three hundred threads", command: server("many-threads"),
            expect: .stall(.lock, frames: lockFrames, blocking: "lock-holder")),
    ]

    @Test(.timeLimit(.minutes(3)), arguments: cases)
    func eachStallOfAStrippedCServiceIsDiagnosedFromOutside(_ c: CorpusCase) throws {
        try #require(Self.binary != nil, "cc could not build the fixture")
        try CorpusHarness.check(c)
    }

    /// How long a sync of 384 MiB takes depends on the disk (about 220 ms on a quiet machine here): so the test
    /// first times an fsync of the same amount, dirtied the same way (written, then left a second, as the service
    /// does before its loop's tenth tick), on the same filesystem and sets the threshold to a third of it. A thread
    /// inside fsync (state D) does not stop for a capture until the call returns, so the call is checked in the
    /// evidence, not the frames. The reports go to tmpfs: the sidecar's own fsync of a report on the target's disk
    /// waits behind the target's sync and would leave the stall unwatched meanwhile.
    ///
    /// Other writers on the same disk (other suites write and sync hundreds of MiB) make one sync slower than the
    /// next, so the service says how long its own fsync took: a run whose fsync lasted two thresholds must give
    /// exactly one io report; a run whose fsync was quicker than that proves nothing, and is tried again, at most
    /// three times, with a third of the time that fsync took. So does a run the machine held up: a loaded machine can
    /// keep the thread woken from the sync's waits off the CPU for most of the call, and then the report says
    /// `starved` (the documented verdict when the run queue's wait alone took the loop past its threshold). And so
    /// does a run whose sidecar woke late itself (an event says by how much) for most of the sync.
    @Test(.timeLimit(.minutes(3)))
    func aLongFsyncOfAStrippedCServiceIsIOWhateverTheDisk() throws {
        try #require(Self.binary != nil, "cc could not build the fixture")
        let mebibytes = 384
        // The service leaves its file (deleting it would be kernel work of its own), in a directory of the test's
        // on the same filesystem as the measurement.
        let directory = SidecarFixtures.temporaryDirectory("fsync")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var basisMs = try Self.fsyncMilliseconds(mebibytes: mebibytes, in: directory)
        var tried: [String] = []
        for _ in 0..<3 {
            let threshold = min(250, max(20, basisMs / 3))
            let c = CorpusCase(
                name: "c long fsync (\(mebibytes) MiB, \(basisMs) ms measured, threshold \(threshold) ms)",
                command: Self.server("fsync", "\(mebibytes)"), expect: .stall(.io, frames: []), thresholdMs: threshold,
                evidenceContains: "in I/O (fsync)", environment: ["TMPDIR": directory], reportParent: "/dev/shm")
            let seen = try CorpusHarness.observe(c)
            let tookMs = try #require(
                seen.targetStderr.split(separator: "\n").compactMap { line -> Int? in
                    line.hasPrefix("fsync ") ? Int(line.dropFirst(6).prefix { $0.isNumber }) : nil
                }.first, "the service did not say how long its fsync took: \(seen.targetStderr)")
            // A run whose fsync the machine, not the disk, made long (the thread woken from the call's waits kept
            // from a CPU, so that without the run queue's wait it stays under the threshold) gets the documented
            // `starved` verdict: its reports are checked for that, and it proves nothing about I/O.
            let heldUp =
                !seen.reports.isEmpty
                && seen.reports.allSatisfy {
                    $0.cause?.isStarvedByTheMachine == true && $0.pointStack?.frames.first?.symbol == "fsync"
                }
            // The sidecar says when it woke late itself (its `lateWakeup` event, the watching thread kept from
            // running): a sync that did not outlast that lateness by two thresholds was mostly over before the
            // sidecar looked, and proves nothing either.
            let watcherLateMs =
                seen.events.compactMap { event -> Double? in
                    guard let range = event.range(of: "lateWakeup(delayMs: ") else { return nil }
                    return Double(event[range.upperBound...].prefix { $0.isNumber || $0 == "." })
                }.max() ?? 0
            let seenInTime = Double(tookMs) >= watcherLateMs + Double(2 * threshold)
            if seenInTime && !heldUp { return try CorpusHarness.judge(c, seen) }
            tried.append(
                "\(tookMs) ms at threshold \(threshold) ms, the sidecar \(watcherLateMs) ms late "
                    + "(\(seen.reports.map(CorpusHarness.describe)))")
            basisMs = tookMs
        }
        Issue.record(
            "the service's fsync never lasted two thresholds on the disk's account, in the sidecar's sight: \(tried)")
    }

    /// Writes `mebibytes` MiB into a new file in `directory` and times its fsync, in milliseconds.
    static func fsyncMilliseconds(mebibytes: Int, in directory: String) throws -> Int {
        var path = Array("\(directory)/stallwatch_fsync_probe_XXXXXX".utf8CString)
        let fd = mkstemp(&path)
        try #require(fd >= 0, "mkstemp in \(directory): errno \(errno)")
        defer { close(fd) }
        let block = [UInt8](repeating: 0x78, count: 1 << 20)
        for _ in 0..<mebibytes { try #require(write(fd, block, block.count) == block.count) }
        usleep(1_000_000)
        let start = ContinuousClock.now
        try #require(fsync(fd) == 0)
        let elapsed = ContinuousClock.now - start
        return Int(elapsed.components.seconds * 1000 + elapsed.components.attoseconds / 1_000_000_000_000_000)
    }
}

/// A healthy busy loop on a CPU shared with CPU hogs: at plain 2× oversubscription (same nice level) it gets its
/// share and is not blamed; niced to 19 below them it is starved, and said so. Slow: about five seconds each.
@Suite(.offPool, .serialized) struct CorpusStarvationTests {
    static func pinned(_ nice: String, _ mode: String, _ ms: String, ticks: String = "12") -> [String] {
        [
            "/usr/bin/nice", "-n", nice, "/usr/bin/taskset", "-c", "0", CorpusNativeTests.binary ?? "/nonexistent",
            mode, ms, ticks,
        ]
    }

    /// The niced loop's run-queue wait and CPU time are measured from the start of each stall (the last progress
    /// the sidecar saw), not from its first sample, so a stall caught by a single sample still has its evidence;
    /// captures that time out because the thread gets no CPU to reach the stop are weighed against the run queue.
    /// Six ticks: at nice 19 behind other work on its CPU each 20 ms tick can take seconds.
    static let cases: [CorpusCase] = [
        CorpusCase(
            name: "c healthy busy loop at 2x oversubscription", command: pinned("10", "busy", "5"),
            expect: .noBlame, competingSpinners: 1),
        CorpusCase(
            name: "c niced busy loop under CPU load", command: pinned("19", "busy", "20", ticks: "6"),
            expect: .every(.starved), competingSpinners: 2),
    ]

    @Test(.timeLimit(.minutes(3)), arguments: cases)
    func aLoopHeldUpByTheMachineIsNotBlamed(_ c: CorpusCase) throws {
        try #require(CorpusNativeTests.binary != nil, "cc could not build the fixture")
        try CorpusHarness.check(c)
    }
}
