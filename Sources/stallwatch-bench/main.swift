// Benchmarks for scripts/bench.sh: prints markdown tables of what each stage costs (DESIGN §11).
import Foundation

let which = CommandLine.arguments.dropFirst().first ?? "all"
if which == "clock-spinner" { ClockSpinner.run() }  // the target of the pause benchmark
if which == "task-memory-probe" {  // a process of suspended tasks for the task table's memory benchmark
    let numbers = CommandLine.arguments.dropFirst(2).compactMap { Int($0) }
    TaskTableMemoryBenchmarks.probe(maxTasks: numbers.first ?? 0, tasks: numbers.dropFirst().first ?? 100_000)
}
let known = ["all", "loop", "named", "symbols", "capture", "sidecar", "pause", "inspect", "pool", "tasks", "lockbook"]
guard known.contains(which) else {
    FileHandle.standardError.write(Data("stallwatch-bench: unknown suite \(which); one of \(known)\n".utf8))
    exit(2)
}
if which == "all" || which == "loop" {
    Table.header("Loop and watchdog")
    LoopBenchmarks.transitionCost()
    LoopBenchmarks.throughput()
    TickBenchmarks.tickPairCost()
    TickBenchmarks.tickCost()
    LoopBenchmarks.fixedRateCPU(itemsPerSecond: 10_000)
    LoopBenchmarks.fixedRateCPU()
    LoopBenchmarks.residentPerLoop()
    LoopBenchmarks.idleWakeups()
    LoopBenchmarks.detectionLatency()
}
if which == "all" || which == "loop" || which == "named" {
    if which == "named" { Table.header("Threads watched by name") }
    NamedThreadBenchmarks.detectionLatency()
}
if which == "all" || which == "symbols" {
    SymbolicationBenchmarks.run()
}
if which == "all" || which == "capture" {
    runCaptureBenchmarks()
}
if which == "all" || which == "sidecar" {
    runSidecarBenchmarks()
}
if which == "all" || which == "sidecar" || which == "pause" {
    runTargetPauseBenchmarks()
}
if which == "all" || which == "pool" {
    Table.header("Concurrency pool")
    ConcurrencyBenchmarks.jobTimingCost()
}
if which == "all" || which == "tasks" {
    Table.header("Task table")
    ServerWorkloadBenchmarks.tableCost()
    if CommandLine.arguments.dropFirst(2).first != "--cost-only" { TaskTableMemoryBenchmarks.memory() }
}
if which == "all" || which == "lockbook" {
    Table.header("Lock book")
    LockBookBenchmarks.callCost()
}
if which == "all" || which == "inspect" {
    runInspectorBenchmarks()
    runInspectorFloorBenchmarks()
}
