#!/usr/bin/env bash
# Keeps both CPUs and the disk busy while a command runs, as a busy CI machine does: a package build in a loop
# (this one, from scratch in a directory of its own, which keeps every CPU busy) and a writer that writes and
# fsyncs 800 MiB files; `--spin` adds one CPU spinner per CPU at nice 0 for a harsher load. Stops every part of the load when the command ends and exits with the command's status.
#
# Usage: scripts/load.sh [--no-build] [--spin] [--no-disk] -- COMMAND [ARGS...]
#        scripts/load.sh -- scripts/test.sh        # the whole suite under load
set -euo pipefail
cd "$(dirname "$0")/.."

build=1 spin=0 disk=1
while [ $# -gt 0 ]; do
    case "$1" in
        --no-build) build=0 ;;
        --spin) spin=1 ;;
        --no-disk) disk=0 ;;
        --) shift; break ;;
        *) echo "load.sh: unknown option '$1' (usage: scripts/load.sh [--no-build] [--spin] [--no-disk] -- COMMAND...)" >&2
           exit 2 ;;
    esac
    shift
done
[ $# -gt 0 ] || { echo "load.sh: no command given (usage: scripts/load.sh [options] -- COMMAND...)" >&2; exit 2; }

scratch=$(mktemp -d /tmp/stallwatch-load.XXXXXX)
pids=()
# Every process of one part of the load: its session (the compiler driver puts each compiler in a process group
# of its own, so the part's process group is not enough).
part_processes() { pgrep -s "$1" 2>/dev/null || true; }
stop_load() {
    for p in "${pids[@]}"; do pkill -TERM -s "$p" 2>/dev/null || true; done
    # A compiler or a dd in the middle of a sync may take a moment to go; what is left after 10 s is killed.
    for _ in $(seq 100); do
        left=""
        for p in "${pids[@]}"; do left+=$(part_processes "$p"); done
        [ -z "$left" ] && break
        sleep 0.1
    done
    for p in "${pids[@]}"; do pkill -KILL -s "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$scratch"
}
trap stop_load EXIT

# Each part runs in a session of its own (setsid), so stopping it stops every process it started (the build's
# compilers, dd) and nothing else.
if [ "$build" = 1 ]; then
    setsid bash -c "while :; do rm -rf '$scratch/build'; swift build --scratch-path '$scratch/build' >/dev/null 2>&1 || sleep 1; done" &
    pids+=($!)
fi
if [ "$spin" = 1 ]; then
    for _ in $(seq "$(nproc)"); do
        setsid bash -c 'while :; do :; done' &
        pids+=($!)
    done
fi
if [ "$disk" = 1 ]; then
    setsid bash -c "while :; do dd if=/dev/zero of='$scratch/disk' bs=1M count=800 conv=fsync status=none; rm -f '$scratch/disk'; done" &
    pids+=($!)
fi
echo "load.sh: load running (build=$build spin=$spin disk=$disk); running: $*" >&2

set +e
"$@"
status=$?
set -e
exit "$status"
