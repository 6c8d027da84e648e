# A Python service that logs to an HTTP log collector (logging.handlers.HTTPHandler) from its loop thread and from
# an audit thread, the way such code is written; the collector takes connections but never answers. logging holds a
# handler's lock (a threading.RLock) over its emit: the audit thread keeps it while it waits for the answer, and the
# loop's next record waits for the lock. Prints READY, turns its loop a while (20 ms ticks), then prints
# "STUCK <CLOCK_REALTIME ns> <CPU ns> <run-queue ns>" (the last two: the loop thread's own schedstat) just before
# it logs. Stays stuck until killed.
#
# usage: python3 logging_stuck.py
import logging
import logging.handlers
import socket
import threading
import time

# The collector: it listens, and nobody accepts or answers.
collector = socket.socket()
collector.bind(("127.0.0.1", 0))
collector.listen(8)

emitting = threading.Event()


class CollectorHandler(logging.handlers.HTTPHandler):
    def emit(self, record):
        if threading.current_thread().name == "audit":
            emitting.set()
        super().emit(record)


log = logging.getLogger("service")
log.addHandler(CollectorHandler(f"127.0.0.1:{collector.getsockname()[1]}", "/log", method="POST"))


def audit():
    with open(f"/proc/self/task/{threading.get_native_id()}/comm", "w") as f:
        f.write("audit")
    log.warning("audit: session opened")


def stamp():
    with open("/proc/thread-self/schedstat") as f:
        cpu, queued = f.read().split()[:2]
    print(f"STUCK {time.time_ns()} {cpu} {queued}", flush=True)


print("READY", flush=True)
for _ in range(25):
    time.sleep(0.02)
threading.Thread(target=audit, name="audit", daemon=True).start()
emitting.wait()
stamp()
log.warning("request served")
