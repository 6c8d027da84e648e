#!/usr/bin/env bash
# The README's main job: a service loop stalls in each classic way, StallWatch catches every stall, and the
# reports are listed and one is shown. Then the chat-sessions service: under load, unremedied, it stalls in five
# classic ways and StallWatch reports each; remedied (--fixed), under the same load, it never stalls.
# Sets up a fresh machine first.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/bootstrap.sh
echo "== build"
swift build --product stallwatch-demo 2>&1 | { grep -E "error|warning|Build complete" || true; }
swift build --product stallwatch 2>&1 | { grep -E "error|warning|Build complete" || true; }
bin=$(swift build --show-bin-path)

reports=$(mktemp -d "${TMPDIR:-/tmp}/stallwatch-demo-reports.XXXXXX")
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    rm -f "${service_reports:-/nonexistent}".*.log "${fixed_reports:-/nonexistent}".*.log
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
echo "== an epoll server on four event-loop threads StallWatch knows by name only (demo-elt-0…3): demo-elt-3 stalls"
"$bin/stallwatch-demo" stall --loop threads --threads 4 --kind cpu --duration-ms 750 --threshold-ms 250 \
    --delay-ms 300 --report-dir "$reports" &
pids+=($!)
wait "${pids[-1]}"

echo
echo "== hung awaits: Swift tasks that wait forever while every thread is idle (threshold 1 s). Among 1,000 tasks"
echo "   cycling through Task.sleep, one awaits a continuation nobody resumes, one awaits the first task's value,"
echo "   a task-group child awaits another such continuation; a stream consumer and a 30 s sleep are not hung"
hung_reports=$(mktemp -d "${TMPDIR:-/tmp}/stallwatch-hung-await-reports.XXXXXX")
STALLWATCH_HUNG_AWAIT_THRESHOLD_MS=1000 STALLWATCH_REPORT_DIRECTORY="$hung_reports" \
    "$bin/stallwatch-demo" stall --loop concurrency --kind hung-await --duration-ms 1500 &
pids+=($!)
wait "${pids[-1]}"
"$bin/stallwatch" reports list "$hung_reports"
chained=$(grep -l 'awaitFirstTask' "$hung_reports"/stall-*.json | head -n 1 || true)
if [ -n "$chained" ]; then
    echo
    echo "== stallwatch reports show (the task that awaits the first: the chain down to the continuation)"
    "$bin/stallwatch" reports show "$chained"
fi
for function in awaitReplyThatNeverComes awaitFirstTask groupChildWaits; do
    if ! grep -q "$function" "$hung_reports"/stall-*.json; then
        echo "demo: no hung-await report names $function" >&2
        exit 1
    fi
done
hung_count=$(ls "$hung_reports"/stall-*.json | wc -l)
if [ "$hung_count" -ne 3 ]; then
    echo "demo: expected 3 hung-await reports, found $hung_count" >&2
    exit 1
fi

echo
echo "== stallwatch reports list $reports"
"$bin/stallwatch" reports list "$reports"

first=$(ls "$reports"/stall-*.json | head -n 1)
echo
echo "== stallwatch reports show (the first report)"
"$bin/stallwatch" reports show "$first"

count=$(ls "$reports"/stall-*.json | wc -l)
if [ "$count" -ne 5 ]; then
    echo "demo: expected 5 reports (four stall kinds and the event-loop thread), found $count" >&2
    exit 1
fi
echo
echo "demo: 5 stalls injected, 5 reports written to $reports"

# The chat-sessions service: the first stdout line of `serve` is {"event":"listening","port":N,...}.
service_reports=$(mktemp -d "${TMPDIR:-/tmp}/stallwatch-service-reports.XXXXXX")
fixed_reports=$(mktemp -d "${TMPDIR:-/tmp}/stallwatch-service-fixed-reports.XXXXXX")
kinds=(io sort lock deadlock reentrant)

# start_service LOG REPORT_DIR [--fixed]: starts serve in the background; sets service_pid and port.
start_service() {
    local log=$1 dir=$2
    shift 2
    : >"$log"  # exists before the background redirect opens it, for the grep below
    "$bin/stallwatch-demo" serve --port 0 --sessions 2000 --threshold-ms 250 --report-dir "$dir" "$@" >"$log" &
    service_pid=$!
    pids+=("$service_pid")
    for _ in $(seq 200); do
        if grep -q '"event":"listening"' "$log"; then break; fi
        if ! kill -0 "$service_pid" 2>/dev/null; then echo "demo: serve exited early" >&2; exit 1; fi
        sleep 0.1
    done
    port=$(head -n 1 "$log" | sed -nE 's/.*"port":([0-9]+).*/\1/p')
    if [ -z "$port" ]; then echo "demo: serve did not report its port" >&2; exit 1; fi
}

# drive_load LOG: 6 s of load at 40 requests/s on 4 connections, each stall kind injected once, then /quit.
drive_load() {
    "$bin/stallwatch-demo" load --port "$port" --seconds 6 --rate 40 --connections 4 --sessions 2000 \
        --stall "${kinds[@]}" --stall-ms 600 --quit | tee "$1"
    wait "$service_pid"
}

echo
echo "== the chat service, unremedied: journal fsync, DB lock and full re-sort on the loop for every message"
echo "   load: 6 s at 40 requests/s; injected: ${kinds[*]} (600 ms each); threshold 250 ms"
start_service "$service_reports.serve.log" "$service_reports"
drive_load "$service_reports.load.log"
unfixed_count=$(find "$service_reports" -name 'stall-*.json' | wc -l)

echo
echo "== stallwatch reports summary $service_reports"
"$bin/stallwatch" reports summary "$service_reports"
echo
echo "== stallwatch reports list $service_reports"
"$bin/stallwatch" reports list "$service_reports"
deadlock=$(grep -l 'lockSessionsThenIndex' "$service_reports"/stall-*.json | head -n 1 || true)
if [ -n "$deadlock" ]; then
    echo
    echo "== stallwatch reports show (the deadlock: two locks taken in opposite orders)"
    "$bin/stallwatch" reports show "$deadlock"
fi

echo
echo "== the chat service, remedied (--fixed): group-committed journal off the loop, DB hand-off through a"
echo "   ThreadSafeArray, coalesced background re-sort; the stall endpoints run their remedied versions"
start_service "$fixed_reports.serve.log" "$fixed_reports" --fixed
drive_load "$fixed_reports.load.log"
fixed_count=$(find "$fixed_reports" -name 'stall-*.json' | wc -l)

p99() { sed -nE "s/.*\"$2\":([0-9.]+).*/\\1/p" "$1"; }
latency() { echo "p99 latency $(p99 "$1" p99Ms) ms (reads $(p99 "$1" readP99Ms) ms, posts $(p99 "$1" postP99Ms) ms)"; }
echo
echo "demo: unremedied service: $unfixed_count stall reports, $(latency "$service_reports.load.log")"
echo "demo: remedied service:   $fixed_count stall reports, $(latency "$fixed_reports.load.log")"
if [ "$unfixed_count" -lt "${#kinds[@]}" ]; then
    echo "demo: expected at least ${#kinds[@]} reports from the unremedied service, found $unfixed_count" >&2
    exit 1
fi
# Each injected stall is named by a report of its cause (the function in the report's samples, the cause the
# classifier gave): a count alone would pass with every cause wrong.
expected_causes=(io:writeJournalSynchronously:io sort:resortHugeSessionList:cpu lock:waitForDatabaseWriterLock:lock
    deadlock:lockSessionsThenIndex:deadlock reentrant:reenterSessionLockFromEnumeration:deadlock)
for entry in "${expected_causes[@]}"; do
    IFS=: read -r kind function cause <<<"$entry"
    mapfile -t naming < <(grep -l "ServiceStalls.$function" "$service_reports"/stall-*.json || true)
    if [ "${#naming[@]}" -eq 0 ]; then
        echo "demo: no report names ServiceStalls.$function (the $kind stall)" >&2
        exit 1
    fi
    found=$("$bin/stallwatch" reports list "${naming[@]}" --cause "$cause" --json | grep -c '"cause"' || true)
    # A CPU-bound stall on a machine whose other work kept the loop from a CPU for most of it is `starved`: the
    # verdict says the machine, not the sort, held the loop up past the threshold. Right on a busy machine; said.
    if [ "$found" -eq 0 ] && [ "$cause" = cpu ]; then
        starved=$("$bin/stallwatch" reports list "${naming[@]}" --cause starved --json | grep -c '"cause"' || true)
        if [ "$starved" -gt 0 ]; then
            echo "demo: the $kind stall's report says starved, not cpu: this machine's other work kept the loop from a CPU (run the demo on a quiet machine to see cpu)"
            found=$starved
        fi
    fi
    if [ "$found" -eq 0 ]; then
        echo "demo: the $kind stall's reports (${naming[*]}) do not give the cause $cause:" >&2
        "$bin/stallwatch" reports list "${naming[@]}" >&2
        exit 1
    fi
done
if [ "$fixed_count" -ne 0 ]; then
    echo "demo: the remedied service stalled $fixed_count times" >&2
    exit 1
fi
echo "demo: the same load and the same injected work: ${#kinds[@]}+ stalls without the remedies, each of its cause; none with them"
