import StallWatchTestSupport
// The sidecar on Node.js (Debian's nodejs): libuv's epoll loop, V8's JIT code named from its perf map.
import Testing

/// Stalls of `Fixtures/corpus/node_service.js`, run with `--perf-basic-prof` so JIT frames have names.
/// Slow: each case runs the service for about three seconds.
@Suite(.offPool, .serialized) struct CorpusNodeTests {
    static func node(_ mode: String, _ ms: String = "1000") -> [String] {
        [
            "/usr/bin/node", "--perf-basic-prof", "--interpreted-frames-native-stack", "--logfile=/dev/null",
            "--no-logfile-per-isolate",
            CorpusHarness.fixture("node_service.js"), mode, ms,
        ]
    }

    static let cases: [CorpusCase] = [
        CorpusCase(name: "node idle loop", command: node("idle"), expect: .noReport),
        CorpusCase(name: "node cpu in JIT code", command: node("cpu"), expect: .stall(.cpu, frames: ["burnCpu"])),
        // The perf map grows by a line per compiled template while the handler runs: that writing is no turn.
        CorpusCase(
            name: "node cpu compiling templates as it renders", command: node("compile"),
            expect: .stall(.cpu, frames: []), pointStackContains: ["renderTemplates"]),
        CorpusCase(
            name: "node subprocess runner's own epoll loop", command: node("child"),
            expect: .stall(.io, frames: ["epoll"])),
        // One stall over the whole save (768 writes, the fsync, the close of the unlinked file): its point stack is
        // the call most samples are in when one dominates, else the function that makes all three.
        CorpusCase(
            name: "node sync write and fsync", command: node("fsync"),
            expect: .stall(.io, frames: ["fsync", "write", "close", "syncWriteAndFsync"]),
            thresholdMs: 150, pointStackContains: ["syncWriteAndFsync"]),
        CorpusCase(
            name: "node Atomics.wait", command: node("atomics"), expect: .stall(.lock, frames: ["futex", "cond"])),
    ]

    @Test(.timeLimit(.minutes(3)), arguments: cases)
    func eachStallOfANodeServiceIsDiagnosedFromOutside(_ c: CorpusCase) throws {
        try CorpusHarness.check(c)
    }
}
