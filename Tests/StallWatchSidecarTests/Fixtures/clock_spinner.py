#!/usr/bin/env python3
"""A target that spins on CLOCK_MONOTONIC, 60 Python frames deep, and prints every gap between two
consecutive clock reads longer than argv[1] nanoseconds (default 20000) as
"GAP <start_ns> <end_ns> <slices> <cpu_ns>": <slices> is its thread's count of times it was put on a CPU
(/proc/thread-self/schedstat's third field), read as the gap ended (a gap during which it was put on a CPU once is
one stop or preemption, more is several), and <cpu_ns> the CPU time the thread itself used across the gap (its
thread CPU clock read beside each monotonic one: work the kernel did for it, such as a page fault, is no pause).
Prints "READY <pid> <slices>" once spinning; runs until killed."""
import os, sys, time

threshold = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
mono = time.monotonic_ns
cpu = time.thread_time_ns
write = sys.stdout.write
flush = sys.stdout.flush
schedstat = open("/proc/thread-self/schedstat", "rb", buffering=0)


def slices():
    schedstat.seek(0)
    return int(schedstat.read().split()[2])


def spin(depth):
    if depth:
        return spin(depth - 1)
    print("READY", os.getpid(), slices(), flush=True)
    last, last_cpu = mono(), cpu()
    while True:
        now, now_cpu = mono(), cpu()
        if now - last > threshold:
            write(f"GAP {last} {now} {slices()} {now_cpu - last_cpu}\n")
            flush()
            now, now_cpu = mono(), cpu()
        last, last_cpu = now, now_cpu


spin(60)
