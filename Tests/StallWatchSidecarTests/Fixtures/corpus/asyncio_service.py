#!/usr/bin/env python3
"""A small asyncio service nobody instrumented, for the sidecar's corpus: it idles in its event loop (timers
every 100 ms), then one callback stalls the loop in the way MODE says, then it idles again and exits 0.

usage: asyncio_service.py MODE [STALL_SECONDS]   (prints READY once the loop runs; for save-document, the argument
is the document's size in MiB, saved into $TMPDIR, and the service prints SAVED with its own wall-clock times, in
nanoseconds: the save's start, the write's end, the fsync's end and the close's end)"""
import asyncio, os, queue, select, selectors, sys, threading, time

MODE = sys.argv[1]
STALL = float(sys.argv[2]) if len(sys.argv) > 2 else 1.0


def name_thread(name):
    with open(f"/proc/self/task/{threading.get_native_id()}/comm", "w") as f:
        f.write(name)


def holder(lock, hold, name, then=None):
    """A thread that takes `lock`, holds it for `hold` seconds (or until it gets `then`), and releases it."""
    ready = threading.Event()

    def run():
        name_thread(name)
        with lock:
            ready.set()
            if then is None:
                time.sleep(hold)
            else:
                with then:
                    pass

    threading.Thread(target=run, daemon=True).start()
    ready.wait()


def stall():
    if MODE == "cpu":
        end = time.thread_time() + STALL  # STALL seconds of work, however long a loaded machine makes it
        n = 0
        while time.thread_time() < end:
            n += sum(range(200))
    elif MODE == "sleep":
        time.sleep(STALL)
    elif MODE == "select-sleep":
        select.select([], [], [], STALL)  # an interpreter's sleep: a select on no descriptor
    elif MODE == "nested-select":
        r, _ = os.pipe()
        select.select([r], [], [], STALL)  # a client waiting for an answer that does not come
    elif MODE == "nested-epoll":
        r, _ = os.pipe()
        sel = selectors.EpollSelector()  # the same native call site as the loop's own wait, another epoll fd
        sel.register(r, selectors.EVENT_READ)
        sel.select(STALL)
    elif MODE == "blocking-read":
        os.write(go_w, b"g")  # the writer, started before the loop, answers STALL seconds later
        os.read(data_r, 1)
    elif MODE == "lock":
        lock = threading.Lock()  # a POSIX semaphore: no owner field to read
        holder(lock, STALL, "lock-holder")
        lock.acquire()
    elif MODE == "big-write":
        # One write() of 1 GiB into tmpfs: the thread works inside the kernel (state R) the whole time, whatever
        # the disk, and a ptrace interrupt waits until the call returns. The source is an untouched anonymous
        # mapping (zero pages). Freeing the file and the mapping takes the kernel a while too: another thread
        # does it once the stall is over (in the loop, or at exit, it would be a stall of its own).
        import mmap

        path = f"/dev/shm/stallwatch-corpus-write-{os.getpid()}"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.unlink(path)
        source = mmap.mmap(-1, 1 << 30)
        os.write(fd, source)

        def free():
            os.close(fd)
            source.close()

        threading.Thread(target=free, daemon=True).start()
    elif MODE == "save-document":
        # A handler that saves a large document the simple way, blocking the loop: one write, a flush and an fsync
        # so that it is on disk, and the close. The file stays (deleting it would be kernel work of its own).
        started = time.time_ns()
        with open(os.path.join(os.environ.get("TMPDIR", "/tmp"), f"saved-document-{os.getpid()}"), "wb") as f:
            f.write(document)
            written = time.time_ns()
            f.flush()
            os.fsync(f.fileno())
            synced = time.time_ns()
        print("SAVED", started, written, synced, time.time_ns(), flush=True)
    elif MODE in ("deadlock", "rlock-deadlock"):
        # Two locks taken in opposite orders by the loop and a worker. The loop gives up after STALL seconds (a
        # timed acquire), so the service survives.
        first.acquire()
        take_second.set()
        second_taken.wait()
        if second.acquire(timeout=STALL):
            second.release()
        first.release()
    elif MODE in ("flock", "fcntl-lock"):
        # The service takes a lock on a shared file that another process (a backup job, say) holds for a while.
        release_other()
        with open(lock_path, "w") as f:
            if MODE == "flock":
                fcntl.flock(f, fcntl.LOCK_EX)
            else:
                fcntl.lockf(f, fcntl.LOCK_EX)
    elif MODE == "pipe-read":
        # A handler that runs a command and waits for its output: the read blocks until the command is done.
        subprocess.check_output(["sleep", str(STALL)])
    elif MODE == "unix-socket":
        # A request to a local daemon over its Unix socket; the daemon takes its time to answer.
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(daemon_path)
            s.sendall(b"status\n")
            s.recv(64)
        os.unlink(daemon_path)
    elif MODE == "tcp-loopback":
        # A request to a slow HTTP backend on this machine, made the simple way from the loop.
        connection = http.client.HTTPConnection("127.0.0.1", backend_port)
        connection.request("GET", "/report")
        connection.getresponse().read()
        connection.close()
    elif MODE == "mp-lock":
        # The loop takes the multiprocessing.Lock a worker process holds while it writes its batch.
        os.write(batch_go_w, b"g")
        batch_lock.acquire()
        batch_lock.release()
    elif MODE == "self-pipe-sleep":
        # A housekeeping pause that a signal can cut short: wait on the wake-up pipe (written non-blocking from a
        # signal handler, as the self-pipe trick wants) for at most STALL seconds.
        select.select([wakeup_r], [], [], STALL)
    elif MODE == "logging-lock":
        # The loop logs while the audit thread's record is still being shipped: logging holds a handler's lock (a
        # threading.RLock) over its emit, and the HTTP log collector takes STALL seconds to answer.
        audit_go.set()
        audit_emitting.wait()
        log.warning("request served")
    elif MODE == "timed-lock":
        lock = threading.Lock()
        holder(lock, STALL, "lock-holder")
        lock.acquire(timeout=STALL * 4)


if MODE == "save-document":
    document = b"x" * (int(STALL) << 20)  # what the service has to save, built before the loop runs

if MODE in ("deadlock", "rlock-deadlock"):
    # The worker is started before the loop runs (a thread start can itself wait on a lock under load). The locks
    # are threading.Locks (POSIX semaphores: no owner recorded), or threading.RLocks (each records its owner beside
    # its semaphore) in a service whose thread pool idles beside them.
    first, second = (threading.Lock(), threading.Lock()) if MODE == "deadlock" else (threading.RLock(), threading.RLock())
    take_second, second_taken = threading.Event(), threading.Event()

    def crosswise():
        name_thread("ledger-worker" if MODE == "deadlock" else "reindex")
        take_second.wait()
        with second:
            second_taken.set()
            with first:
                pass

    threading.Thread(target=crosswise, daemon=True).start()

if MODE in ("flock", "fcntl-lock"):
    # Another process holds the lock from before the loop runs until STALL seconds after the stall begins.
    import fcntl, subprocess

    lock_path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"stallwatch-corpus-lock-{os.getpid()}")
    take = "fcntl.flock(f, fcntl.LOCK_EX)" if MODE == "flock" else "fcntl.lockf(f, fcntl.LOCK_EX)"
    other = subprocess.Popen(
        [sys.executable, "-c", f"import fcntl, sys, time\nf = open({lock_path!r}, 'w')\n{take}\nprint('HELD', flush=True)\n"
         "sys.stdin.readline()\ntime.sleep(float(sys.argv[1]))", str(STALL)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    other.stdout.readline()
    release_other = lambda: (other.stdin.write("go\n"), other.stdin.flush())

if MODE == "rlock-deadlock":
    # The thread pool's two workers, started before the loop runs, then idle waiting for work.
    import concurrent.futures

    pool = concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="pool")
    started = threading.Barrier(3)
    for _ in range(2):
        pool.submit(started.wait)
    started.wait()

if MODE == "logging-lock":
    # Records go to an HTTP log collector on this machine (logging.handlers.HTTPHandler), from the loop and from an
    # audit thread; the collector, started before the loop runs, takes STALL seconds over the audit thread's record.
    import logging, logging.handlers, subprocess

    collector = subprocess.Popen(
        [sys.executable, "-c", "import http.server, sys, time\n"
         "open('/proc/self/comm', 'w').write('log-collector')\n"
         "class Slow(http.server.BaseHTTPRequestHandler):\n"
         "    def do_POST(self):\n"
         "        self.rfile.read(int(self.headers['Content-Length']))\n"
         "        if self.server.first:\n            time.sleep(float(sys.argv[1]))\n"
         "        self.server.first = False\n"
         "        self.send_response(200)\n        self.send_header('Content-Length', '0')\n"
         "        self.end_headers()\n"
         "    def log_message(self, *args):\n        pass\n"
         "server = http.server.HTTPServer(('127.0.0.1', 0), Slow)\nserver.first = True\n"
         "print(server.server_port, flush=True)\nserver.handle_request()\nserver.handle_request()", str(STALL)],
        stdout=subprocess.PIPE, text=True)
    collector_port = int(collector.stdout.readline())

    class AuditHandler(logging.handlers.HTTPHandler):
        def emit(self, record):
            if threading.current_thread().name == "audit":
                audit_emitting.set()
            super().emit(record)

    log = logging.getLogger("service")
    log.addHandler(AuditHandler(f"127.0.0.1:{collector_port}", "/log", method="POST"))
    audit_go, audit_emitting = threading.Event(), threading.Event()

    def audit():
        name_thread("audit")
        audit_go.wait()
        log.warning("audit: session opened")

    threading.Thread(target=audit, name="audit", daemon=True).start()

if MODE in ("pipe-read", "unix-socket", "tcp-loopback"):
    import http.client, socket, subprocess

if MODE == "unix-socket":
    # The local daemon, started before the loop runs: it answers one request STALL seconds after reading it.
    daemon_path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"stallwatch-corpus-daemon-{os.getpid()}.sock")
    daemon = subprocess.Popen(
        [sys.executable, "-c", "import socket, sys, time\n"
         "open('/proc/self/comm', 'w').write('status-daemon')\n"
         "server = socket.socket(socket.AF_UNIX)\nserver.bind(sys.argv[1])\nserver.listen(1)\n"
         "print('LISTENING', flush=True)\nconnection, _ = server.accept()\nconnection.recv(64)\n"
         "time.sleep(float(sys.argv[2]))\nconnection.sendall(b'ok\\n')", daemon_path, str(STALL)],
        stdout=subprocess.PIPE, text=True)
    daemon.stdout.readline()

if MODE == "tcp-loopback":
    # The backend, started before the loop runs: an http.server that takes STALL seconds over one request.
    backend = subprocess.Popen(
        [sys.executable, "-c", "import http.server, sys, time\n"
         "open('/proc/self/comm', 'w').write('http-backend')\n"
         "class Slow(http.server.BaseHTTPRequestHandler):\n"
         "    def do_GET(self):\n"
         "        time.sleep(float(sys.argv[1]))\n"
         "        self.send_response(200)\n        self.send_header('Content-Length', '2')\n"
         "        self.end_headers()\n        self.wfile.write(b'ok')\n"
         "    def log_message(self, *args):\n        pass\n"
         "server = http.server.HTTPServer(('127.0.0.1', 0), Slow)\n"
         "print(server.server_port, flush=True)\nserver.handle_request()", str(STALL)],
        stdout=subprocess.PIPE, text=True)
    backend_port = int(backend.stdout.readline())

if MODE == "mp-lock":
    # A worker process, forked before the loop runs, that holds a multiprocessing.Lock (a POSIX semaphore in shared
    # memory) until STALL seconds after the loop's go.
    import multiprocessing

    context = multiprocessing.get_context("fork")
    batch_lock = context.Lock()
    held_r, held_w = os.pipe()
    batch_go_r, batch_go_w = os.pipe()

    def write_batch():
        with open("/proc/self/comm", "w") as f:
            f.write("batch-writer")
        with batch_lock:
            os.write(held_w, b"h")
            os.read(batch_go_r, 1)
            time.sleep(STALL)
        os._exit(0)

    worker = context.Process(target=write_batch, daemon=True)
    worker.start()
    os.read(held_r, 1)

if MODE == "self-pipe-sleep":
    wakeup_r, wakeup_w = os.pipe()
    os.set_blocking(wakeup_w, False)

if MODE == "blocking-read":
    # No thread is started during the stall (a thread start can itself wait on a lock under load).
    go_r, go_w = os.pipe()
    data_r, data_w = os.pipe()

    def writer():
        os.read(go_r, 1)
        time.sleep(STALL)
        os.write(data_w, b"x")

    threading.Thread(target=writer, daemon=True).start()


async def main():
    loop = asyncio.get_running_loop()

    def tick():
        loop.call_later(0.1, tick)

    tick()
    print("READY", flush=True)
    await asyncio.sleep(1.0)
    if MODE != "idle":
        stall()
    await asyncio.sleep(1.0 if MODE != "idle" else 1.5)


if MODE == "two-loops":
    # Two event-loop threads (loop-a, loop-b), as a service with a loop per core runs them; only loop-b stalls.
    def serve(name, stalls):
        name_thread(name)

        async def run():
            loop = asyncio.get_running_loop()

            def tick():
                loop.call_later(0.1, tick)

            tick()
            await asyncio.sleep(1.0)
            if stalls:
                time.sleep(STALL)
            await asyncio.sleep(1.0)

        asyncio.run(run())

    if os.environ.get("HEARTBEAT_SEGMENT"):
        # Publish a heartbeat as an embedded StallWatch would: the test writes the segment for this pid (its main
        # thread idle) once told the pid, and the process keeps it mapped (what marks it the segment's owner).
        import mmap, signal

        signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR1])
        print("PID", os.getpid(), flush=True)
        signal.sigwait([signal.SIGUSR1])
        with open(os.environ["HEARTBEAT_SEGMENT"], "r+b") as f:
            segment = mmap.mmap(f.fileno(), 0)
    threads = [threading.Thread(target=serve, args=(n, n == "loop-b")) for n in ("loop-a", "loop-b")]
    for t in threads:
        t.start()
    time.sleep(0.1)
    print("READY", flush=True)
    for t in threads:
        t.join()
elif MODE == "stuck-beside-stalls":
    # Two event-loop threads: loop-a's callback reads a pipe that only loop-b writes to, after loop-b's callbacks
    # have stalled it three times (STALL seconds of sleep each, 0.3 s apart); then both idle 1 s and the service
    # exits. Prints READ with loop-a's read's start and end (CLOCK_MONOTONIC, nanoseconds).
    r, w = os.pipe()

    def serve(name):
        name_thread(name)

        async def run():
            loop = asyncio.get_running_loop()

            def tick():
                loop.call_later(0.1, tick)

            tick()
            await asyncio.sleep(1.0)
            if name == "loop-a":
                start = time.monotonic_ns()
                os.read(r, 1)
                print("READ", start, time.monotonic_ns(), flush=True)
            else:
                await asyncio.sleep(0.3)
                for _ in range(3):
                    time.sleep(STALL)
                    await asyncio.sleep(0.3)
                os.write(w, b"x")
            await asyncio.sleep(1.0)

        asyncio.run(run())

    threads = [threading.Thread(target=serve, args=(n,)) for n in ("loop-a", "loop-b")]
    for t in threads:
        t.start()
    time.sleep(0.1)
    print("READY", flush=True)
    for t in threads:
        t.join()
elif MODE == "changing-loops":
    # Loop threads that come and go, each an asyncio loop ticking every 100 ms, driven by SIGUSR1 from the test:
    # at the first, loop-a exits, loop-b starts, "spare" renames itself loop-c and loop-d renames itself old-d;
    # at the second, loop-b and loop-c each stall once (a STALL-second sleep), then everything exits.
    import signal

    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR1])  # every thread inherits it; main takes it by sigwait
    phase = [0]
    stalls_done = threading.Semaphore(0)
    tids = {}
    started = threading.Semaphore(0)

    def serve(name, stalls=False, rename_to=None, ends_at=3):
        name_thread(name)
        tids[name] = threading.get_native_id()
        started.release()

        async def run():
            loop = asyncio.get_running_loop()
            done = loop.create_future()
            state = {"renamed": rename_to is None, "stalled": not stalls}

            def tick():
                if phase[0] >= ends_at:
                    done.set_result(None)
                    return
                if phase[0] >= 1 and not state["renamed"]:
                    name_thread(rename_to)
                    state["renamed"] = True
                if phase[0] >= 2 and not state["stalled"]:
                    state["stalled"] = True
                    time.sleep(STALL)
                    stalls_done.release()
                loop.call_later(0.1, tick)

            tick()
            await done

        asyncio.run(run())

    def spawn(*args, **kwargs):
        t = threading.Thread(target=serve, args=args, kwargs=kwargs)
        t.start()
        started.acquire()
        return t

    threads = [spawn("loop-a", ends_at=1), spawn("spare", stalls=True, rename_to="loop-c"),
               spawn("loop-d", rename_to="old-d")]
    print("READY", " ".join(f"{n}={t}" for n, t in tids.items()), flush=True)
    signal.sigwait([signal.SIGUSR1])
    phase[0] = 1
    threads.append(spawn("loop-b", stalls=True))
    print("CHANGED", f"loop-b={tids['loop-b']}", flush=True)
    signal.sigwait([signal.SIGUSR1])
    phase[0] = 2
    stalls_done.acquire()
    stalls_done.acquire()
    time.sleep(1.0)  # idle again before exiting, so each stall is seen to end
    phase[0] = 3
    for t in threads:
        t.join()
elif MODE == "queue-idle":
    # A loop that parks on a condition variable (queue.get) while another thread feeds it work.
    jobs = queue.Queue()

    def feeder():
        for _ in range(12):
            time.sleep(0.25)
            jobs.put(lambda: None)
        jobs.put(None)

    print("READY", flush=True)
    threading.Thread(target=feeder, daemon=True).start()
    while (job := jobs.get()) is not None:
        job()
elif MODE == "loop-starts-worker":
    # An event-loop thread (loop-a) whose callback starts a worker thread and leaves it unnamed: on Linux it carries
    # loop-a's name. The worker sleeps STALL seconds (on nothing the loop waits for) and ends; after it, the loop
    # itself stalls once (a STALL-second sleep in a callback), idles again and exits.
    def serve():
        name_thread("loop-a")

        async def run():
            loop = asyncio.get_running_loop()

            def tick():
                loop.call_later(0.1, tick)

            tick()
            await asyncio.sleep(0.5)
            worker = threading.Thread(target=time.sleep, args=(STALL,))
            worker.start()
            print("WORKER", f"loop-a={threading.get_native_id()}", f"worker={worker.native_id}", flush=True)
            while worker.is_alive():
                await asyncio.sleep(0.1)
            await asyncio.sleep(0.5)
            time.sleep(STALL)
            await asyncio.sleep(1.0)

        asyncio.run(run())

    loop_thread = threading.Thread(target=serve)
    loop_thread.start()
    print("READY", flush=True)
    loop_thread.join()
else:
    asyncio.run(main())
# The service's work is done: skip interpreter finalization, which on a loaded machine can itself take longer
# than the threshold and is no part of the loop being judged.
sys.stdout.flush()
os._exit(0)
