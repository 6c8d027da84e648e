# Two small Python services that idle until a late piece of work, written as their users write them: a
# socketserver TCP server (its loop idles in poll) and a queue-fed worker loop (its main thread idles in a lock
# acquire, a futex wait). Once the loop has idled IDLE_MS (its own clock), one piece of work sleeps 800 ms,
# printing "STUCK <CLOCK_REALTIME ns>" as it starts and "DONE" after; then the program exits 0.
#
# usage: python3 idle_service.py socketserver|queue IDLE_MS   (prints READY once the loop runs)
import queue
import socketserver
import sys
import threading
import time

mode = sys.argv[1]
idle_s = int(sys.argv[2]) / 1000


def late_work():
    print(f"STUCK {time.time_ns()}", flush=True)
    time.sleep(0.8)
    print("DONE", flush=True)


class Handler(socketserver.BaseRequestHandler):
    def handle(self):
        self.request.sendall(self.request.recv(1024))


class Server(socketserver.TCPServer):
    allow_reuse_address = True
    due = time.monotonic() + idle_s
    worked = False

    def service_actions(self):
        # Called by serve_forever each time its poll times out.
        if not self.worked and time.monotonic() >= self.due:
            self.worked = True
            late_work()
            threading.Thread(target=self.shutdown).start()


if mode == "socketserver":
    with Server(("127.0.0.1", 0), Handler) as server:
        print("READY", flush=True)
        server.serve_forever(poll_interval=0.2)
elif mode == "queue":
    jobs = queue.Queue()
    threading.Timer(idle_s, jobs.put, args=(late_work,)).start()
    threading.Timer(idle_s + 1.2, jobs.put, args=(None,)).start()
    print("READY", flush=True)
    while (job := jobs.get()) is not None:
        job()
else:
    sys.exit(f"unknown mode {mode}")
