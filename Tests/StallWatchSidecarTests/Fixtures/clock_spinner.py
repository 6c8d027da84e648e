#!/usr/bin/env python3
"""A target that spins on CLOCK_MONOTONIC, 60 Python frames deep, and prints every gap between two
consecutive clock reads longer than argv[1] nanoseconds (default 20000) as "GAP <start_ns> <end_ns>".
Prints READY once spinning; runs until killed."""
import os, sys, time

threshold = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
mono = time.monotonic_ns
write = sys.stdout.write
flush = sys.stdout.flush


def spin(depth):
    if depth:
        return spin(depth - 1)
    print("READY", os.getpid(), flush=True)
    last = mono()
    while True:
        now = mono()
        if now - last > threshold:
            write(f"GAP {last} {now}\n")
            flush()
            now = mono()
        last = now


spin(60)
