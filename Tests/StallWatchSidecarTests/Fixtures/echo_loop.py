#!/usr/bin/env python3
"""A healthy, busy event loop nobody instrumented: the main thread serves a loopback TCP echo with selectors
while a child process sends a continuous stream of small requests. Prints READY, runs until killed."""
import os, selectors, signal, socket, sys, time

server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("127.0.0.1", 0))
server.listen(16)
port = server.getsockname()[1]

client_pid = os.fork()
if client_pid == 0:
    c = socket.create_connection(("127.0.0.1", port))
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    while True:
        c.sendall(b"x" * 64)
        got = 0
        while got < 64:
            data = c.recv(64 - got)
            if not data:
                sys.exit(0)
            got += len(data)

signal.signal(signal.SIGTERM, lambda *_: (os.kill(client_pid, signal.SIGKILL), sys.exit(0)))
sel = selectors.DefaultSelector()
sel.register(server, selectors.EVENT_READ)
print("READY", flush=True)
served = 0
while True:
    for key, _ in sel.select(timeout=1.0):
        if key.fileobj is server:
            conn, _ = server.accept()
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sel.register(conn, selectors.EVENT_READ)
        else:
            data = key.fileobj.recv(4096)
            if not data:
                sel.unregister(key.fileobj)
                key.fileobj.close()
                continue
            key.fileobj.sendall(data)
            served += 1
