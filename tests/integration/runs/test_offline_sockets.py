"""Issue 27, finding 6: the offline agent phase reaches no host socket, in either sandbox.

An execution runs (the worker's path: ``execute_execution``, replay provider, the real sandbox)
a command that tries every way out a hostile model found under Landlock: connecting to a
pathname Unix socket of the host (a listener of the test's, standing for PostgreSQL's
``/var/run/postgresql/.s.PGSQL.5432`` with peer authentication; and ``/run/mysqld/mysqld.sock``
itself where this host has a MySQL server), sending UDP to a loopback
listener, opening netlink, a datagram socket pair that could ``sendto`` a pathname socket,
and ``listen`` on TCP. The witnesses are the listeners: nothing may reach them. Before the fix,
Landlock mode connected and sent (its seccomp filter let every socket through); bubblewrap was
already closed (own network namespace, no host ``/tmp``). The positive control runs the same
execution without a sandbox: both witnesses then receive, so they do catch a leak. A second
test checks that the programs a command needs (git, python, node, npm) still work offline.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from services.db.executions import ExecutionRepository
from services.db.redaction import Redactor
from services.runs.durable import execute_execution
from services.runs.request import ExecutionRequest, create_execution
from services.settings import SandboxMode
from tests.conftest import IN_CI
from tests.integration.repo_env import DONE, TOKEN, RepoWorld, repo_world
from tests.unit.execution.command_helpers import require_sandbox

pytestmark = pytest.mark.sandbox

PROBE = """import os, socket, stat, sys
unix_path, udp_port = sys.argv[1], int(sys.argv[2])
def inherited_sockets():  # a socket left open by the harness could be connected or sent on
    found = []
    for fd in range(1024):
        try:
            if stat.S_ISSOCK(os.fstat(fd).st_mode):
                found.append(fd)
        except OSError:
            pass
    return found
print("inherited", inherited_sockets())
def attempt(name, action):
    try:
        action()
        print(name, "REACHED")
    except OSError as exc:
        print(name, "refused", type(exc).__name__)
def unix():
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(5)
        s.connect(unix_path)
        s.sendall(b"unix-leak")
def udp():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.sendto(b"udp-leak", ("127.0.0.1", udp_port))
def dgram_pair():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    a.sendto(b"pair-leak", unix_path + ".dgram")
def netlink():
    socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0).close()
def listen():
    with socket.socket() as s:
        s.listen(1)
def host_service():  # a real one when this host has it: MySQL greets whoever connects
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(5)
        s.connect(sys.argv[3])
        if not s.recv(100):
            raise OSError("no greeting")
attempt("unix", unix)
attempt("udp", udp)
attempt("dgram_pair", dgram_pair)
attempt("netlink", netlink)
attempt("listen", listen)
if len(sys.argv) > 3:
    attempt("host_service", host_service)
"""
HOST_SERVICE = Path("/run/mysqld/mysqld.sock")
WRITE = {"tool": "workspace.write_file", "args": {"path": "NOTES.md", "content": "ok\n"}}
ATTEMPTS = ("unix", "udp", "dgram_pair", "netlink", "listen")


class Witnesses:
    """A host Unix stream listener, a Unix datagram socket beside it and a UDP listener on
    loopback: what reached each of them."""

    def __init__(self, directory: Path) -> None:
        self.path = str(directory / "s.sock")
        self.unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.unix.bind(self.path)
        self.unix.listen(8)
        self.unix_dgram = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.unix_dgram.bind(self.path + ".dgram")
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", 0))
        self.port = self.udp.getsockname()[1]
        for s in (self.unix, self.unix_dgram, self.udp):
            s.setblocking(False)

    def received(self) -> dict[str, bytes]:
        got: dict[str, bytes] = {}
        with contextlib.suppress(BlockingIOError):
            conn, _ = self.unix.accept()
            conn.settimeout(5)
            with conn:
                got["unix"] = conn.recv(100) or b"(connected)"
        for name, s in (("dgram_pair", self.unix_dgram), ("udp", self.udp)):
            with contextlib.suppress(BlockingIOError):
                got[name] = s.recv(100)
        return got

    def close(self) -> None:
        for s in (self.unix, self.unix_dgram, self.udp):
            s.close()


@pytest.fixture
def witnesses() -> Iterator[Witnesses]:
    # a short path: a Unix socket's name is at most 107 bytes
    directory = Path(tempfile.mkdtemp(prefix="studio-w-"))
    found = Witnesses(directory)
    try:
        yield found
    finally:
        found.close()
        shutil.rmtree(directory, ignore_errors=True)


def _execute(world: RepoWorld, tmp_path: Path, mode: SandboxMode,
             calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One offline repository execution under ``mode`` running ``calls``; their results."""
    if mode is not SandboxMode.NONE:
        require_sandbox(mode.value)
    settings = world.settings().model_copy(update={"workspace_dir": tmp_path / "ws",
                                                   "sandbox": mode})
    db = world.database()
    try:
        execution_id = create_execution(db, ExecutionRequest(
            provider="replay", prompt="look around", repo_url=world.url, pull_request=False,
            script={"turns": [{"tool_calls": [*calls, WRITE]}, {"final": DONE}]}),
            Redactor([TOKEN]), settings=settings)
        outcome = execute_execution(execution_id, settings=settings, db=db)
        events = [(e.kind, e.data) for e in ExecutionRepository(db).events(execution_id)]
    finally:
        db.dispose()
    assert outcome.status == "succeeded", outcome
    results = [d["envelope"] for kind, d in events if kind == "tool_result"]
    assert all(r["ok"] for r in results), results
    return [r["result"] for r in results if "exit_code" in r["result"]]


def _probe(witnesses: Witnesses) -> dict[str, Any]:
    return {"tool": "command.run", "args": {
        "argv": ["python3", "-c", PROBE, witnesses.path, str(witnesses.port),
                 *([str(HOST_SERVICE)] if HOST_SERVICE.is_socket() else [])]}}


def _verdicts(stdout: str) -> dict[str, str]:
    return {line.split()[0]: line.split()[1] for line in stdout.splitlines()
            if line.split() and line.split()[0] in (*ATTEMPTS, "host_service")}


@pytest.mark.parametrize("mode", [SandboxMode.LANDLOCK, SandboxMode.BWRAP])
def test_the_offline_agent_reaches_no_host_socket(
        tmp_path: Path, witnesses: Witnesses, mode: SandboxMode) -> None:
    with repo_world(tmp_path, {}) as world:
        [result] = _execute(world, tmp_path, mode, [_probe(witnesses)])
    assert result["sandbox"] == mode.value and result["exit_code"] == 0, result
    verdicts = _verdicts(result["stdout"])
    assert witnesses.received() == {}, result["stdout"]
    assert "inherited []" in result["stdout"], result["stdout"]
    assert verdicts.pop("host_service", "refused") == "refused", result["stdout"]
    assert set(verdicts) == set(ATTEMPTS), result
    if mode is SandboxMode.LANDLOCK:  # refused by the filter itself, not by chance
        assert verdicts == dict.fromkeys(ATTEMPTS, "refused"), result["stdout"]
    else:  # its own network namespace: a UDP send to its own loopback goes nowhere
        assert {k: v for k, v in verdicts.items() if k != "udp"} == {
            "unix": "refused", "dgram_pair": "refused", "netlink": "REACHED",
            "listen": "REACHED"}, result["stdout"]


def test_without_a_sandbox_the_witnesses_do_receive(
        tmp_path: Path, witnesses: Witnesses) -> None:
    """Positive control: the same execution unconfined reaches both listeners."""
    with repo_world(tmp_path, {}) as world:
        [result] = _execute(world, tmp_path, SandboxMode.NONE, [_probe(witnesses)])
    verdicts = _verdicts(result["stdout"])
    assert verdicts["unix"] == verdicts["udp"] == verdicts["dgram_pair"] == "REACHED", result
    if HOST_SERVICE.is_socket():  # this host's MySQL answers an unconfined command
        assert verdicts["host_service"] == "REACHED", result
    assert witnesses.received() == {"unix": b"unix-leak", "udp": b"udp-leak",
                                    "dgram_pair": b"pair-leak"}


PACKAGE_JSON = '{"name": "p", "version": "1.0.0", "scripts": {"hello": "node hello.js"}}\n'
HELLO = ("const {execFileSync} = require('child_process');\n"
         "console.log('node', execFileSync('git', ['rev-parse', '--is-inside-work-tree'])"
         ".toString().trim());\n")
PYTHON = ("import asyncio, multiprocessing, subprocess\n"
          "async def main():\n"
          "    proc = await asyncio.create_subprocess_exec('git', 'log', '--oneline', '-1',"
          " stdout=asyncio.subprocess.PIPE)\n"
          "    return (await proc.communicate())[0].decode().strip()\n"
          "def child(end):\n"
          "    end.send(abs(-2))\n"
          "if __name__ == '__main__':\n"
          "    mine, theirs = multiprocessing.Pipe()  # a socket pair\n"
          "    worker = multiprocessing.Process(target=child, args=(theirs,))\n"
          "    worker.start()\n"
          "    assert mine.recv() == 2\n"
          "    worker.join()\n"
          "    print('python', bool(asyncio.run(main())))\n")


@pytest.mark.parametrize("mode", [SandboxMode.LANDLOCK, SandboxMode.BWRAP])
def test_the_usual_programs_still_work_offline(tmp_path: Path, mode: SandboxMode) -> None:
    if shutil.which("node") is None or shutil.which("npm") is None:
        if IN_CI:
            pytest.fail("node and npm are needed")
        pytest.skip("node and npm are needed")
    files = {"tool/package.json": PACKAGE_JSON, "tool/hello.js": HELLO, "tool/check.py": PYTHON}
    calls = [
        {"tool": "command.run", "args": {"command": "git status --short && git log -1 --oneline"
                                         " && git diff --stat HEAD && echo git-ok"}},
        {"tool": "command.run", "args": {"argv": ["python3", "tool/check.py"]}},
        {"tool": "command.run", "args": {"command": "npm run --silent hello", "cwd": "tool"}},
        {"tool": "command.run", "args": {"command": "npm --version && node --version"}},
    ]
    with repo_world(tmp_path, files) as world:
        git, python, npm, versions = _execute(world, tmp_path, mode, calls)
    assert git["exit_code"] == 0 and "git-ok" in git["stdout"], git
    assert python["exit_code"] == 0 and "python True" in python["stdout"], python
    assert npm["exit_code"] == 0 and "node true" in npm["stdout"], npm
    assert versions["exit_code"] == 0 and versions["stdout"].count("\n") == 2, versions
