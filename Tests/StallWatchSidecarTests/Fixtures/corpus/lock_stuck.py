# A Python service whose cache is guarded by a threading.Lock (a POSIX semaphore: it records no owner). A refresh
# thread takes the lock and, while holding it, fetches the new entries from an upstream that takes connections but
# never answers; the loop's next request reads the cache and waits for the lock. Prints READY, turns its loop a
# while (20 ms ticks), then prints "STUCK <CLOCK_REALTIME ns> <CPU ns> <run-queue ns>" (the last two: the loop
# thread's own schedstat) just before it takes the lock. Stays stuck until killed.
#
# usage: python3 lock_stuck.py
import socket
import threading
import time

# The upstream: it listens, and nobody accepts or answers.
upstream = socket.socket()
upstream.bind(("127.0.0.1", 0))
upstream.listen(8)

cache = {}
cache_lock = threading.Lock()
refreshing = threading.Event()


def refresh():
    with open(f"/proc/self/task/{threading.get_native_id()}/comm", "w") as f:
        f.write("cache-refresh")
    with cache_lock:
        refreshing.set()
        with socket.create_connection(upstream.getsockname()) as connection:
            connection.sendall(b"GET /entries HTTP/1.0\r\n\r\n")
            cache.update(entries=connection.recv(65536))


def stamp():
    with open("/proc/thread-self/schedstat") as f:
        cpu, queued = f.read().split()[:2]
    print(f"STUCK {time.time_ns()} {cpu} {queued}", flush=True)


print("READY", flush=True)
for _ in range(25):
    time.sleep(0.02)
threading.Thread(target=refresh, name="cache-refresh", daemon=True).start()
refreshing.wait()
stamp()
with cache_lock:
    print(cache.get("entries"), flush=True)
