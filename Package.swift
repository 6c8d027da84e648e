// swift-tools-version:6.0
// StallWatch: a main-loop stall watchdog for Linux services.
import PackageDescription

/// Debian's libunwind-dev puts its headers under the multiarch include directory.
let multiarchInclude = "/usr/include/x86_64-linux-gnu"

let package = Package(
    name: "StallWatch",
    products: [
        .library(name: "StallWatch", targets: ["StallWatch"]),
        .library(name: "StallWatchInspector", targets: ["StallWatchInspector"]),
        .library(name: "StallWatchCommands", targets: ["StallWatchCommands"]),
        .library(name: "StallWatchRemedies", targets: ["StallWatchRemedies"]),
        .library(name: "StallWatchSidecar", targets: ["StallWatchSidecar"]),
        .executable(name: "stallwatch", targets: ["stallwatch"]),
        .executable(name: "stallwatch-demo", targets: ["stallwatch-demo"]),
    ],
    targets: [
        // The only code that runs in a signal handler, speaks libunwind's macro API, raw ptrace or libdwfl.
        .target(
            name: "CStallWatch",
            cSettings: [
                .define("_GNU_SOURCE"),
                .unsafeFlags(["-I\(multiarchInclude)", "-Wall", "-Wextra", "-Wno-unused-parameter"]),
            ],
            linkerSettings: [
                .linkedLibrary("unwind-ptrace"),
                .linkedLibrary("unwind-generic"),
                .linkedLibrary("unwind"),
                .linkedLibrary("lzma"),
                .linkedLibrary("dw"),
                .linkedLibrary("elf"),
            ]
        ),
        // What a service embeds: run loop, watchdog, in-process capture, symbolication, reports.
        .target(name: "StallWatch", dependencies: ["CStallWatch"]),
        // Out-of-process monitoring: heartbeat reader, /proc progress probe, ptrace sampling, the daemon loop and
        // the child process `run` starts.
        .target(name: "StallWatchSidecar", dependencies: ["StallWatch", "CStallWatch"]),
        // Presenting reports: scanning, summaries, views, exporters, HTML, offline symbolication.
        .target(name: "StallWatchInspector", dependencies: ["StallWatch"]),
        // The command line: command table, arguments, console, exit codes; watch/run/daemon/reports as glue.
        .target(name: "StallWatchCommands", dependencies: ["StallWatch", "StallWatchInspector", "StallWatchSidecar"]),
        // Loop-friendly tools for the problems reports reveal: thread-safe array, debouncer, throttler,
        // chunked and idle execution, off-loop work with on-loop delivery.
        .target(name: "StallWatchRemedies", dependencies: ["StallWatch"]),
        .executableTarget(name: "stallwatch", dependencies: ["StallWatchCommands"]),
        .executableTarget(name: "stallwatch-demo", dependencies: ["StallWatch", "StallWatchRemedies"]),
        // The measurements behind scripts/bench.sh (DESIGN §11); not a product.
        .executableTarget(
            name: "stallwatch-bench",
            dependencies: [
                "StallWatch", "StallWatchInspector", "StallWatchCommands", "StallWatchSidecar", "CStallWatch",
            ]),
        .testTarget(name: "StallWatchTests", dependencies: ["StallWatch", "CStallWatch"]),
        .testTarget(
            name: "StallWatchSidecarTests", dependencies: ["StallWatchSidecar", "StallWatch", "CStallWatch"],
            exclude: ["Fixtures"]),
        .testTarget(
            name: "StallWatchInspectorTests",
            dependencies: ["StallWatchInspector", "StallWatchCommands", "StallWatch"],
            resources: [.copy("Fixtures")]),
        .testTarget(name: "StallWatchRemediesTests", dependencies: ["StallWatchRemedies", "StallWatch"]),
        .testTarget(
            name: "StallWatchCommandsTests",
            dependencies: ["StallWatchCommands", "StallWatchInspector", "StallWatchSidecar", "StallWatch"]),
    ],
    swiftLanguageModes: [.v6]
)
