// The sidecar on a Go service whose loop blocks inside C code it calls through cgo: the C frames unwind with CFI,
// the Go callers are on the goroutine stack the runtime left (runtime.asmcgocall).
import Foundation
import StallWatchTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Stalls of `Fixtures/corpus/cgo_service` (main.go and service.c), built by the test with the system's Go
/// toolchain and C compiler, once with its symbol table and once stripped (`-ldflags=-s`). Slow: each case runs the
/// service for about four seconds.
@Suite(.offPool, .serialized) struct CorpusGoTests {
    /// The build cache lives under the package's `.build` (warm after the first run; no HOME needed).
    static let cacheDirectory = SidecarFixtures.fixturesDirectory.deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent(".build/go-fixtures").path

    static let binary: String? = build(stripped: false)
    static let strippedBinary: String? = build(stripped: true)

    /// `go build` of the fixture into a temporary directory; nil when there is no Go toolchain or the build fails.
    static func build(stripped: Bool) -> String? {
        let out = SidecarFixtures.temporaryDirectory("cgo-service") + "/cgo_service"
        let build = Process()
        build.executableURL = URL(fileURLWithPath: "/usr/bin/go")
        build.arguments = ["build", "-o", out] + (stripped ? ["-ldflags=-s"] : [])
        build.currentDirectoryURL = URL(fileURLWithPath: CorpusHarness.fixture("cgo_service"))
        build.environment = [
            "PATH": "/usr/bin:/bin", "CGO_ENABLED": "1", "GOENV": "off", "GOFLAGS": "", "GOTOOLCHAIN": "local",
            "GOCACHE": cacheDirectory + "/cache", "GOPATH": cacheDirectory + "/path", "TMPDIR": NSTemporaryDirectory(),
        ]
        build.standardOutput = FileHandle.nullDevice
        build.standardError = FileHandle.nullDevice
        guard (try? build.run()) != nil else { return nil }
        build.waitUntilExit()
        return build.terminationStatus == 0 ? out : nil
    }

    static func service(_ mode: String, stripped: Bool = false) -> [String] {
        [(stripped ? strippedBinary : binary) ?? "/nonexistent", mode, "1000"]
    }

    /// The Go frames above the C call, found past the stack switch: the cgo stub, the function that called C, and
    /// its callers up to the goroutine's start.
    static let goCallers = ["runtime.cgocall", "main.stallInC", "main.handleTick", "main.main", "runtime.main"]

    static let cases: [CorpusCase] = [
        CorpusCase(name: "go idle loop in epoll_wait", command: service("idle"), expect: .noReport),
        CorpusCase(
            name: "go loop blocked on a C mutex", command: service("mutex"),
            expect: .stall(.lock, frames: CorpusNativeTests.lockFrames, blocking: "lock-holder"),
            pointStackContains: ["cgo_service_lock_held_mutex"] + goCallers, stackSwitchAt: "runtime.cgocall",
            sourceFile: ("main.stallInC", "cgo_service/main.go")),
        CorpusCase(
            name: "go loop sleeping in C", command: service("sleep"), expect: .stall(.sleep, frames: ["nanosleep"]),
            pointStackContains: ["cgo_service_sleep"] + goCallers, stackSwitchAt: "runtime.cgocall"),
        CorpusCase(
            name: "go loop reading a pipe in C", command: service("pipe"), expect: .stall(.io, frames: ["read"]),
            pointStackContains: ["cgo_service_read_pipe"] + goCallers, stackSwitchAt: "runtime.cgocall"),
    ]

    @Test(.timeLimit(.minutes(3)), arguments: cases)
    func eachStallOfAGoServiceInCIsDiagnosedWithItsGoCallers(_ c: CorpusCase) throws {
        try #require(Self.binary != nil, "go build of the fixture failed")
        try CorpusHarness.check(c)
    }

    /// Without a symbol table the trampoline cannot be named: the unwind ends at it, as without stack-switch rules,
    /// and nothing past it is guessed.
    @Test(.timeLimit(.minutes(3)))
    func aStrippedGoServiceStopsCleanlyAtTheSwitch() throws {
        try #require(Self.strippedBinary != nil, "go build -ldflags=-s of the fixture failed")
        try CorpusHarness.check(
            CorpusCase(
                name: "stripped go loop blocked on a C mutex", command: Self.service("mutex", stripped: true),
                expect: .stall(.lock, frames: CorpusNativeTests.lockFrames, blocking: "lock-holder"),
                pointStackAtMost: 5))
    }
}
