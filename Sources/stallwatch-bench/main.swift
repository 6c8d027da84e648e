// Benchmarks for scripts/bench.sh: prints markdown tables of what each stage costs (DESIGN §11).
import Foundation

let which = CommandLine.arguments.dropFirst().first ?? "all"
if which == "all" || which == "loop" {
    Table.header("Loop and watchdog")
    LoopBenchmarks.transitionCost()
    LoopBenchmarks.throughput()
    LoopBenchmarks.idleWakeups()
    LoopBenchmarks.detectionLatency()
}
