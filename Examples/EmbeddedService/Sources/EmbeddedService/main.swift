// EmbeddedService: a small service with the StallWatch watchdog embedded on its main loop. It ticks a
// timer, provokes one stall of its own (600 ms of computation on the loop), and exits 0 once the watchdog
// has reported that stall naming the function that caused it; 1 if no such report came within ten seconds.
import Dispatch
import Glibc
import StallWatch
import Synchronization

/// 600 ms of work on the loop: the stall this service provokes, and the function its report must name.
@inline(never)
func recomputeEverything() {
    let end = ContinuousClock.now + .milliseconds(600)
    var sum = 0
    while ContinuousClock.now < end { sum &+= 1 }
    precondition(sum > 0)
}

/// Stalls whose report names `recomputeEverything`.
let stallsReported = Atomic<Int>(0)

let loop = try EventLoop(name: "main")  // CFRunLoop-style activities, built on Dispatch
let configuration = try StallWatchConfiguration.load(fileIfPresent: "/etc/embedded-service/stallwatch.json")
let watchdog = Watchdog(loop: loop, configuration: configuration) { event in
    guard case .ended(let report) = event else { return }
    print("loop stalled \(Int(report.durationMs)) ms in \(report.cause?.kind.rawValue ?? "?"), see \(report.id)")
    let frames = report.pointStack?.frames ?? []
    if frames.contains(where: { $0.symbol?.contains("recomputeEverything") == true }) {
        stallsReported.add(1, ordering: .relaxed)
        loop.stop()  // safe from any thread
    }
}
try watchdog.start()

let ticks = Atomic<Int>(0)
loop.schedule(after: .milliseconds(100), repeating: .milliseconds(100)) { ticks.add(1, ordering: .relaxed) }
loop.schedule(after: .milliseconds(500)) {
    loop.annotate("route", "/recompute")  // lands in the report of a stall during this work
    recomputeEverything()
    loop.clearAnnotations()
}
loop.schedule(after: .seconds(10)) { loop.stop() }  // give up: no report came
DispatchQueue.main.async { print("serving (main-queue work runs on the loop)") }
loop.run()  // until loop.stop()
watchdog.stop()

let reported = stallsReported.load(ordering: .relaxed)
print("ticks: \(ticks.load(ordering: .relaxed)), stalls reported in recomputeEverything: \(reported)")
exit(reported == 1 ? 0 : 1)
