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
stop_load() {
    for p in "${pids[@]}"; do kill -TERM -- "-$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$scratch"
}
trap stop_load EXIT

# Each part runs in a process group of its own (setsid), so stopping it stops its children (compilers, dd).
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
