"""A probe of what a process started by the warm CLI launcher is (``python -m
tests.support.warm_cli_probe COMMAND ...``), for the launcher's own tests: the one module besides
``services.cli`` the zygote forks (:data:`tests.support.warm_cli.FORKABLE_MODULES`), run the same
way, so a test can compare a forked child with a fresh interpreter on what the CLI's commands do
not show: its argv, ``sys.path``, environment, working directory, stdin, process group, signal
handlers, command line in ``/proc``, and its end (threads joined, ``atexit``, signals, exit codes).

Commands: ``report [--stdin]`` (one JSON object on stdout), ``thread`` (a non-daemon thread that
prints after the main thread returned), ``atexit CODE`` (a handler that prints, then exit
``CODE``), ``kill SIGNAL`` (the process signals itself), ``sleep NONCE`` (sleeps: the nonce names
it in ``/proc``), ``raise`` (an uncaught exception).
"""

from __future__ import annotations

import atexit
import gc
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path


def report(read_stdin: bool) -> dict[str, object]:
    handlers = {name: repr(signal.getsignal(getattr(signal, name)))
                for name in ("SIGINT", "SIGTERM", "SIGCHLD", "SIGPIPE", "SIGHUP", "SIGUSR1")}
    cmdline = Path("/proc/self/cmdline").read_bytes().split(b"\0")
    return {
        "argv": sys.argv, "orig_argv": sys.orig_argv, "path0": sys.path[0], "cwd": os.getcwd(),
        "environ": dict(os.environ), "stdin": sys.stdin.read() if read_stdin else None,
        "leader": os.getpgid(0) == os.getpid(), "session": os.getsid(0) == os.getpid(),
        "handlers": handlers, "cmdline": [part.decode() for part in cmdline if part],
        "gc": gc.isenabled(), "threads": threading.active_count(),
        "stdout_line_buffered": sys.stdout.line_buffering, "main": __name__,
        "fds": sorted(int(fd) for fd in os.listdir("/proc/self/fd")),
    }


def _late_line() -> None:
    time.sleep(0.3)
    print("thread finished", flush=True)


def main(argv: list[str]) -> int:
    command = argv[0] if argv else "report"
    if command == "report":
        print(json.dumps(report("--stdin" in argv)))
    elif command == "thread":
        threading.Thread(target=_late_line).start()
        print("main returns", flush=True)
    elif command == "atexit":
        atexit.register(print, "atexit ran")
        return int(argv[1])
    elif command == "kill":
        os.kill(os.getpid(), getattr(signal, argv[1]))
        time.sleep(30)
    elif command == "sleep":
        time.sleep(300)
    elif command == "raise":
        raise RuntimeError("the probe raised")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
