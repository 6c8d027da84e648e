// swift-tools-version:6.2
// StallWatch: a main-loop stall watchdog for Linux services.
import PackageDescription

/// Every StallWatch C target: GNU extensions of glibc (gettid, process_vm_readv, pthread_getattr_np, ucontext
/// register names) and the warnings the C code is kept clean of. Warning settings apply only when StallWatch is
/// the root package; a service that depends on it builds these targets without them.
let cSettings: [CSetting] = [
    .define("_GNU_SOURCE"),
    .enableWarning("all"),
    .enableWarning("extra"),
    .disableWarning("unused-parameter"),
]

let package = Package(
    name: "StallWatch",
    products: [
        .library(name: "StallWatch", targets: ["StallWatch"]),
        .library(name: "StallWatchInspector", targets: ["StallWatchInspector"]),
        .library(name: "StallWatchRemedies", targets: ["StallWatchRemedies"]),
        .library(name: "StallWatchSidecar", targets: ["StallWatchSidecar"]),
        .library(name: "StallWatchCommands", targets: ["StallWatchCommands"]),
        // The lock book, preloaded into a watched program (`LD_PRELOAD`, or `stallwatch run --lock-book`) to record
        // who last took each POSIX semaphore.
        .library(name: "StallWatchLockBook", type: .dynamic, targets: ["CStallWatchLockBook"]),
        .executable(name: "stallwatch", targets: ["stallwatch"]),
        .executable(name: "stallwatch-demo", targets: ["stallwatch-demo"]),
    ],
    targets: [
        // System C libraries, found through pkg-config (Debian ships the .pc files with the -dev packages).
        .systemLibrary(
            name: "CLibunwind", pkgConfig: "libunwind-ptrace",
            providers: [.apt(["libunwind-dev", "liblzma-dev"])]),
        .systemLibrary(
            name: "CLibdw", pkgConfig: "libdw",
            providers: [.apt(["libdw-dev", "libelf-dev", "zlib1g-dev", "liblzma-dev"])]),
        .systemLibrary(name: "CZlib", pkgConfig: "zlib", providers: [.apt(["zlib1g-dev"])]),

        // StallWatch's own C, one concern per target; every exported symbol carries the sw_ prefix and every
        // header says per function whether it is async-signal-safe.
        // The loop-state word layout and heartbeat segment, the register layout, syscall shims (the clock and
        // futex wrappers every other C target uses), libdispatch hooks. Links nothing.
        .target(name: "CStallWatchCore", cSettings: cSettings),
        // The capture signal handler, its request slots and the requesting side. Links nothing.
        .target(name: "CStallWatchSignal", dependencies: ["CStallWatchCore"], cSettings: cSettings),
        // Unwinding copied stacks off-thread with libunwind's remote API. libunwind-ptrace.so leaves liblzma's
        // symbols to the executable (libunwind.pc lists -llzma only as private), so it is named here.
        .target(
            name: "CStallWatchUnwind", dependencies: ["CLibunwind", "CStallWatchCore"], cSettings: cSettings,
            linkerSettings: [.linkedLibrary("lzma")]),
        // Modules, symbols and source lines through libdwfl.
        .target(name: "CStallWatchSymbols", dependencies: ["CLibdw"], cSettings: cSettings),
        // One-thread ptrace capture (seize, interrupt, registers, one stack read, detach). Links nothing.
        .target(name: "CStallWatchPtrace", dependencies: ["CStallWatchCore"], cSettings: cSettings),
        // Timing every Swift Concurrency job: the global enqueue hook, per-worker slots, the pool watchdog's wait;
        // the live task table fed from the same hook.
        .target(
            name: "CStallWatchConcurrency", dependencies: ["CStallWatchCore"], cSettings: cSettings,
            linkerSettings: [
                .linkedLibrary("dispatch"), .linkedLibrary("swift_Concurrency"), .linkedLibrary("swiftCore"),
            ]),
        // The preloadable lock book: interposed semaphore calls recording each semaphore's last taker. Depends on
        // nothing of StallWatch (it goes into other programs) and nothing of StallWatch depends on it (an executable
        // linking it would interpose its own semaphore calls); the readers mirror its table (LockBook.swift).
        .target(name: "CStallWatchLockBook", cSettings: cSettings),
        // Test and benchmark fixtures (known call chains, a thread parked in the loader lock, a forked child that
        // captures); in no product.
        .target(
            name: "CStallWatchFixtures", dependencies: ["CLibunwind", "CStallWatchPtrace"], cSettings: cSettings,
            linkerSettings: [.linkedLibrary("lzma")]),

        // What a service embeds: run loop, watchdog, in-process capture, symbolication, reports.
        .target(
            name: "StallWatch",
            dependencies: [
                "CStallWatchCore", "CStallWatchSignal", "CStallWatchUnwind", "CStallWatchSymbols", "CStallWatchPtrace",
                "CStallWatchConcurrency",
            ]),
        // Out-of-process monitoring: heartbeat reader, /proc progress probe, ptrace sampling, the daemon loop, the
        // child process `run` starts, and one-shot dumps of a live process.
        .target(
            name: "StallWatchSidecar",
            dependencies: ["StallWatch", "CStallWatchCore", "CStallWatchSignal", "CStallWatchPtrace"]),
        // Presenting reports: scanning, summaries, views, exporters, HTML, offline symbolication.
        .target(name: "StallWatchInspector", dependencies: ["StallWatch", "CZlib"]),
        // The command line: command table, arguments, console, exit codes; watch/run/daemon/dump/reports as glue.
        .target(name: "StallWatchCommands", dependencies: ["StallWatch", "StallWatchInspector", "StallWatchSidecar"]),
        // Loop-friendly tools for the problems reports reveal: thread-safe array, debouncer, throttler,
        // chunked and idle execution, off-loop work with on-loop delivery.
        .target(name: "StallWatchRemedies", dependencies: ["StallWatch"]),
        .executableTarget(name: "stallwatch", dependencies: ["StallWatchCommands"]),
        .executableTarget(
            name: "stallwatch-demo", dependencies: ["StallWatch", "StallWatchRemedies", "CStallWatchCore"]),
        // The measurements behind scripts/bench.sh (DESIGN §11); not a product.
        .executableTarget(
            name: "stallwatch-bench",
            dependencies: [
                "StallWatch", "StallWatchInspector", "StallWatchCommands", "StallWatchSidecar", "CStallWatchCore",
                "CStallWatchConcurrency", "CStallWatchFixtures", "CStallWatchPtrace",
            ]),
        // What the test targets share: fixtures and golden reports, spawning programs and waiting for them, running
        // the command line in-process, reading reports, scratch directories. Depended on by test targets only; in
        // no product.
        .target(
            name: "StallWatchTestSupport", dependencies: ["StallWatch", "StallWatchCommands"],
            path: "Tests/StallWatchTestSupport"),
        .testTarget(
            name: "StallWatchTests",
            dependencies: [
                "StallWatchTestSupport", "StallWatch", "StallWatchSidecar", "CStallWatchCore", "CStallWatchSignal",
                "CStallWatchSymbols", "CStallWatchFixtures", "CStallWatchConcurrency",
            ]),
        .testTarget(
            name: "StallWatchSidecarTests",
            dependencies: [
                "StallWatchTestSupport", "StallWatchSidecar", "StallWatch", "CStallWatchCore", "CStallWatchPtrace",
                "CStallWatchFixtures",
            ],
            exclude: ["Fixtures"]),
        .testTarget(
            name: "StallWatchInspectorTests",
            dependencies: [
                "StallWatchTestSupport", "StallWatchInspector", "StallWatchCommands", "StallWatch",
                "CStallWatchSymbols",
            ],
            exclude: ["Fixtures"]),
        .testTarget(
            name: "StallWatchCommandsTests",
            dependencies: [
                "StallWatchTestSupport", "StallWatchCommands", "StallWatchInspector", "StallWatchSidecar", "StallWatch",
            ]),
        .testTarget(
            name: "StallWatchRemediesTests",
            dependencies: ["StallWatchTestSupport", "StallWatchRemedies", "StallWatch"]),
    ],
    swiftLanguageModes: [.v6]
)
