# A Python service whose loop thread and a worker deadlock on two threading.Locks taken in opposite orders, the way
# such code is written: prints READY, turns its loop a while (20 ms ticks), then takes the first lock, starts the
# worker that takes the second, and prints "STUCK <CLOCK_REALTIME ns> <CPU ns> <run-queue ns>" (the last two: the
# loop thread's own schedstat) just before it asks for the second lock. Stays stuck until killed.
#
# usage: python3 lock_deadlock.py
import threading
import time

accounts = threading.Lock()
ledger = threading.Lock()
both_held = threading.Barrier(2)


def audit():
    with ledger:
        both_held.wait()
        with accounts:
            pass


def stamp():
    with open("/proc/thread-self/schedstat") as f:
        cpu, queued = f.read().split()[:2]
    print(f"STUCK {time.time_ns()} {cpu} {queued}", flush=True)


print("READY", flush=True)
for _ in range(25):
    time.sleep(0.02)
with accounts:
    threading.Thread(target=audit, name="auditor").start()
    both_held.wait()
    stamp()
    with ledger:
        pass
