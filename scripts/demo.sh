#!/usr/bin/env bash
# The README's main job: a service loop stalls in each classic way, StallWatch catches every stall, and the
# reports are listed and one is shown. Sets up a fresh machine first.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/bootstrap.sh
echo "== build"
swift build --product stallwatch-demo 2>&1 | grep -E "error|warning|Build complete" || true
swift build --product stallwatch 2>&1 | grep -E "error|warning|Build complete" || true
bin=$(swift build --show-bin-path)

reports=$(mktemp -d "${TMPDIR:-/tmp}/stallwatch-demo-reports.XXXXXX")
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT INT TERM

echo "== reports go to $reports"
for kind in cpu sleep lock io; do
    echo
    echo "== stall kind: $kind (the loop is stuck for 750 ms; threshold 250 ms)"
    "$bin/stallwatch-demo" stall --kind "$kind" --duration-ms 750 --threshold-ms 250 --delay-ms 300 \
        --report-dir "$reports" &
    pids+=($!)
    wait "${pids[-1]}"
done

echo
echo "== stallwatch reports list $reports"
"$bin/stallwatch" reports list "$reports"

first=$(ls "$reports"/stall-*.json | head -n 1)
echo
echo "== stallwatch reports show (the first report)"
"$bin/stallwatch" reports show "$first"

count=$(ls "$reports"/stall-*.json | wc -l)
if [ "$count" -ne 4 ]; then
    echo "demo: expected 4 reports, found $count" >&2
    exit 1
fi
echo
echo "demo: 4 stalls injected, 4 reports written to $reports"
