"""The TCP-connect limit the legacy runtime puts in front of a CLI under bubblewrap (a real
Landlock ruleset on this kernel, in a child process)."""

from __future__ import annotations

import socket
import subprocess
import sys

from services.execution.legacy.netlimit import limited


def _listener() -> socket.socket:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    return server


def test_only_the_allowed_port_can_be_reached() -> None:
    allowed, other = _listener(), _listener()
    try:
        probe = ("import socket, sys\n"
                 "for port in sys.argv[1:]:\n"
                 "    try:\n"
                 "        socket.create_connection(('127.0.0.1', int(port)), 5).close()\n"
                 "        print(port, 'ok')\n"
                 "    except OSError as exc:\n"
                 "        print(port, 'refused', exc.errno)\n")
        ports = [allowed.getsockname()[1], other.getsockname()[1]]
        argv = limited([sys.executable, "-I", "-c", probe, *map(str, ports)], [ports[0]])
        out = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=True)
    finally:
        allowed.close()
        other.close()
    assert out.stdout.splitlines() == [f"{ports[0]} ok", f"{ports[1]} refused 13"]


def test_abstract_unix_sockets_outside_the_cli_are_refused() -> None:
    server = socket.socket(socket.AF_UNIX)
    server.bind(f"\0studio-netlimit-test-{id(server)}")
    server.listen(1)
    try:
        name = server.getsockname()
        probe = ("import socket, sys\n"
                 "s = socket.socket(socket.AF_UNIX)\n"
                 "try:\n"
                 "    s.connect(b'\\0' + sys.argv[1].encode())\n"
                 "    print('ok')\n"
                 "except OSError as exc:\n"
                 "    print('refused', exc.errno)\n")
        text = name.decode() if isinstance(name, bytes) else name
        plain = [sys.executable, "-I", "-c", probe, text.lstrip("\0")]
        control = subprocess.run(plain, capture_output=True, text=True, timeout=30, check=True)
        out = subprocess.run(limited(plain, [443]), capture_output=True, text=True, timeout=30,
                             check=True)
    finally:
        server.close()
    assert control.stdout.strip() == "ok"  # reachable without the limit
    assert out.stdout.strip() == "refused 1"
