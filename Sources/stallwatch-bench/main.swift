// Benchmarks for scripts/bench.sh: prints tables of what each stage costs.
import StallWatch
print("stallwatch-bench: no benchmarks yet")
