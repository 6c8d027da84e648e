#!/usr/bin/env bash
# Measures what each StallWatch stage costs (DESIGN §11) and prints the tables side by side.
# Usage: scripts/bench.sh [all|loop|named|symbols|capture|sidecar|pause|inspect|pool|tasks|lockbook]   (release build; figures drift ±40% run to run on a shared VM)
# Ratios are against anchors measured in the same run: eu-stack and gdb for the pause the target sees, cat for
# inspection (reading the same bytes).
set -euo pipefail
cd "$(dirname "$0")/.."

STALLWATCH_BENCH=1 scripts/bootstrap.sh
for product in stallwatch-bench stallwatch-demo stallwatch StallWatchLockBook; do
    swift build -c release --product "$product" 2>&1 | grep -E "error|warning|Build complete" || true
done
bin=$(swift build -c release --show-bin-path)
echo "# StallWatch benchmarks — $(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
"$bin/stallwatch-bench" "${1:-all}"
