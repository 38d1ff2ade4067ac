"""Helpers of the Celery tests: the broker's address (the ``redis_broker`` fixture, a Redis
database of the test's own on the real broker at 127.0.0.1:6379, is in
``tests/integration/conftest.py``), ``studio worker`` as a real process, and process-tree
inspection in ``/proc``."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TypeVar

import pytest
import redis

from tests.support import warm_cli

REDIS_HOST, REDIS_PORT = "127.0.0.1", 6379
LOCK_KEY = "studio-tests:celery-lock"
STUDIO = [sys.executable, "-m", "services.cli"]
T = TypeVar("T")


@dataclass(frozen=True)
class Broker:
    url: str
    queue: str
    client: redis.Redis


def wait_for(what: str, probe: Callable[[], T | None], timeout: float,
             diagnostics: Callable[[], str] = lambda: "") -> T:
    """Poll ``probe`` until it answers something truthy; fail with ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}\n{diagnostics()}")
        time.sleep(0.1)


@dataclass
class WorkerProcess:
    """A ``studio worker`` running as a process group of its own, its output in a file."""

    process: subprocess.Popen[bytes]
    log_path: Path
    _log: IO[bytes]

    @property
    def pid(self) -> int:
        return self.process.pid

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-6000:]

    def kill(self) -> None:
        """``SIGKILL`` the worker's main process only (its pool and children must follow)."""
        os.kill(self.pid, signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self) -> None:
        """Warm shutdown, then anything left of its group is killed."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.pid, signal.SIGKILL)
                self.process.wait(timeout=30)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGKILL)
        self._log.close()


def start_worker(env: dict[str, str], log_path: Path, *args: str) -> WorkerProcess:
    log = log_path.open("wb")
    process = warm_cli.Popen([*STUDIO, "worker", *args], env=env, stdin=subprocess.DEVNULL,
                             stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    return WorkerProcess(process, log_path, log)


def _stat(pid: int) -> tuple[str, int] | None:
    """``(state, ppid)`` of a process, or ``None`` when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    return fields[0], int(fields[1])


def alive(pid: int) -> bool:
    """Running (a zombie is dead: it can do nothing more)."""
    found = _stat(pid)
    return found is not None and found[0] not in ("Z", "X")


def ancestors(pid: int) -> list[int]:
    chain: list[int] = []
    while (found := _stat(pid)) is not None and found[1] > 1:
        pid = found[1]
        chain.append(pid)
    return chain


def processes_running(*needles: str) -> list[int]:
    """Pids of live processes whose command line holds every one of ``needles``."""
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        words = [part.decode(errors="replace") for part in argv]
        if all(needle in words for needle in needles) and alive(int(entry.name)):
            found.append(int(entry.name))
    return found


def writable_memory(pid: int) -> bytes:
    """Every readable, writable mapping of ``pid`` (heap, stacks, anonymous memory)."""
    chunks: list[bytes] = []
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
        for line in maps:
            fields = line.split()
            if not fields[1].startswith("rw") or line.rstrip().endswith(("[vvar]", "[vsyscall]")):
                continue
            start, end = (int(part, 16) for part in fields[0].split("-"))
            try:
                mem.seek(start)
                chunks.append(mem.read(end - start))
            except OSError:
                continue  # unmapped in the meantime, or not readable after all
    return b"".join(chunks)


@contextlib.contextmanager
def claimed_broker() -> Iterator[Broker]:
    """A Redis database no one else uses (claimed with ``SET NX`` among 1..15), with a unique
    queue name; flushed afterwards."""
    token = uuid.uuid4().hex
    for number in range(15, 0, -1):
        client = redis.Redis(host=REDIS_HOST, port=REDIS_PORT, db=number, socket_timeout=10)
        if client.dbsize() == 0 and client.set(LOCK_KEY, token, nx=True, ex=3600):
            break
        client.close()
    else:
        raise RuntimeError("no free Redis database among 1..15")
    try:
        yield Broker(url=f"redis://{REDIS_HOST}:{REDIS_PORT}/{number}",
                     queue=f"studio-test-{token[:12]}", client=client)
    finally:
        client.flushdb()
        client.close()
