"""The relay inside a sandbox whose network is controlled (standard library only).

Run as ``python -I -S relay.py SOCKET PORT -- PROGRAM ARGS...`` inside the sandbox, which has a
network namespace of its own: only a loopback interface, no route out. The relay listens on
``127.0.0.1:PORT`` of that namespace, carries every connection made there to the unix socket
``SOCKET`` (the harness's egress proxy, :mod:`services.execution.network.proxy`, bound into the
sandbox), and runs the program as its child; it exits with the program's status. Every process
of the command (children of children, daemons) shares the namespace, so the proxy is the only
way out for all of them; a process that ignores the proxy variables simply has no network.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading

CHUNK = 65536


def _copy(src: socket.socket, dst: socket.socket) -> None:
    try:
        while True:
            data = src.recv(CHUNK)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)


def _serve(client: socket.socket, path: str) -> None:
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(path)
    except OSError:
        client.close()
        upstream.close()
        return
    back = threading.Thread(target=_copy, args=(upstream, client), daemon=True)
    back.start()
    _copy(client, upstream)
    back.join()
    client.close()
    upstream.close()


def _accept(listener: socket.socket, path: str) -> None:
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            return
        threading.Thread(target=_serve, args=(client, path), daemon=True).start()


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        sys.stderr.write("usage: relay.py SOCKET PORT -- PROGRAM [ARGS...]\n")
        return 2
    path, port, command = argv[0], int(argv[1]), argv[3:]
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)
    threading.Thread(target=_accept, args=(listener, path), daemon=True).start()
    try:
        child = subprocess.Popen(command, close_fds=True)
    except OSError as exc:
        sys.stderr.write(f"cannot execute: {exc.strerror or exc}\n")
        return 127
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, lambda s, _f: child.send_signal(s))
    status = child.wait()
    return 128 - status if status < 0 else status


if __name__ == "__main__":
    sys.stdout.flush()
    code = main(sys.argv[1:])
    os._exit(code)
