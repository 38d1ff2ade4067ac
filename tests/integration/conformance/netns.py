"""Run a command inside the loopback-only network namespace the conformance table needs.

``unshare -n python -m tests.integration.conformance.netns CMD...`` starts in a fresh network
namespace whose only interface, ``lo``, is down; this brings it up (one ``SIOCSIFFLAGS`` ioctl,
so no ``iproute2`` is needed), marks the environment with ``STUDIO_IN_NETNS=1`` and execs
``CMD``. Nothing but 127.0.0.1 is reachable from there.
"""

from __future__ import annotations

import fcntl
import os
import socket
import struct
import sys

SIOCGIFFLAGS = 0x8913
SIOCSIFFLAGS = 0x8914
IFF_UP = 0x1
MARKER = "STUDIO_IN_NETNS"


def bring_loopback_up() -> None:
    """Set ``IFF_UP`` on ``lo`` (needs CAP_NET_ADMIN in the namespace: root, or ``unshare -r``)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sh", b"lo", 0)
        flags = struct.unpack("16sh", fcntl.ioctl(sock, SIOCGIFFLAGS, request)[:18])[1]
        fcntl.ioctl(sock, SIOCSIFFLAGS, struct.pack("16sh", b"lo", flags | IFF_UP))


def outside_reachable(address: tuple[str, int] = ("192.0.2.1", 80)) -> bool:
    """Whether a TCP connect to a non-loopback address gets anywhere (it must not, here)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(2)
        try:
            sock.connect(address)
        except OSError:
            return False
    return True


def main(argv: list[str]) -> None:
    if not argv:
        raise SystemExit("usage: python -m tests.integration.conformance.netns CMD [ARGS...]")
    bring_loopback_up()
    os.environ[MARKER] = "1"
    os.execvp(argv[0], argv)


if __name__ == "__main__":
    main(sys.argv[1:])
