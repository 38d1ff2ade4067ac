"""Inside the sandbox, before the CLI starts: the only way out is the harness's model proxy.

Under bubblewrap the CLI runs in a network namespace of its own: a loopback interface and
nothing else, so no TCP to any other host or port, no UDP, no host abstract Unix socket. A small
Python program runs first inside the sandbox (the harness's own interpreter, ``-I -S``): it
listens on ``127.0.0.1:RELAY_PORT`` of that namespace, forks a child that accepts connections
and sends each one's descriptor to the harness over a Unix socket the sandbox inherited
(``SCM_RIGHTS``, no socket is created or connected by path), and ``exec``\\ s the CLI (through
:mod:`.netlimit`). The harness's :class:`~services.execution.legacy.keyproxy.KeyProxy` serves the
connections it receives; the CLI's base URL is ``http://127.0.0.1:RELAY_PORT``.
"""

from __future__ import annotations

from collections.abc import Sequence

from services.execution.sandbox.layout import sandbox_python

RELAY_PORT = 47080  # inside the sandbox's own network namespace: no conflict with the host
RELAY_ORIGIN = f"http://127.0.0.1:{RELAY_PORT}"

PROGRAM = r"""
import array, os, socket, sys
channel_fd, port, argv = int(sys.argv[1]), int(sys.argv[2]), sys.argv[4:]
listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", port))
listener.listen(64)
if os.fork() == 0:
    channel = socket.socket(fileno=channel_fd)
    try:
        while True:
            conn, _ = listener.accept()
            channel.sendmsg([b"c"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                                      array.array("i", [conn.fileno()]))])
            conn.close()
    finally:
        os._exit(0)
listener.close()
os.close(channel_fd)
os.execv(argv[0], argv)
"""


def relayed(argv: Sequence[str], channel_fd: int, python: str | None = None) -> list[str]:
    """``argv`` started through :data:`PROGRAM`, its connections to :data:`RELAY_PORT` handed
    to the harness over ``channel_fd``."""
    interpreter = python or sandbox_python()
    return [interpreter, "-I", "-S", "-c", PROGRAM, str(channel_fd), str(RELAY_PORT), "--",
            *argv]
