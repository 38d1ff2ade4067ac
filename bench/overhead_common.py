"""Shared pieces of the step-overhead benchmark: the script, the clock, the per-step statistics.

Every measured loop (harness or floor) talks to a fresh :class:`ScriptedModelServer` whose script
asks N times for ``command_run {"argv": ["true", "<i>"]}`` and then answers a final text. Each
step of the script is wrapped so the server notes the arrival time of every request: the gaps
between consecutive arrivals are the per-step costs, measured the same way for every loop (the
harness, the hand-built floor, the bare Claude Agent SDK loop).

The argv carries the step number (``true`` ignores its arguments) so that the loop's error-loop
detector, which stops a run after 5 identical calls with identical outcomes, sees distinct calls:
the harness runs with its default guards, only ``max_iterations`` is raised to fit N.
"""

from __future__ import annotations

import multiprocessing
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # ``python bench/step_overhead.py`` from the repository root
    sys.path.insert(0, str(ROOT))

from tests.support.model_requests import RequestRecord  # noqa: E402
from tests.support.model_script import Reply, Step, text, tool_calls  # noqa: E402
from tests.support.model_server import ScriptedModelServer  # noqa: E402

from services.execution.messages import ToolSchema  # noqa: E402
from services.execution.ports import CommandSandbox  # noqa: E402
from services.execution.tool_domains.command.tools import command_environment  # noqa: E402
from services.execution.tool_domains.registry import default_registry  # noqa: E402

TASK = "Run `true` until told to stop, then answer."
FINAL = '{"status": "success", "summary": "ran true", "changes": [], "issues": [], ' \
        '"questions": [], "pr_url": null}'
API_KEY = "bench-key-not-secret"
CODEX_MODEL = "gpt-5.1"
GEMINI_MODEL = "gemini-2.5-pro"
CLAUDE_MODEL = "claude-sonnet-4-5"
TOOL = "command_run"
WINDOW = 10  # steps in the early and late windows
_FORK = multiprocessing.get_context("fork")


def neutral_tools() -> list[ToolSchema]:
    """The tool list FrontierAgent declares (every operation of the default registry)."""
    return [ToolSchema(name=s.name, description=s.description, parameters=s.neutral_schema())
            for s in default_registry().specs()]


def step_argv(index: int) -> list[str]:
    return ["true", str(index)]


@dataclass
class Stamps:
    """Arrival time of each model request, noted by the server."""

    times: list[float] = field(default_factory=list)

    def wrap(self, reply: Reply) -> Step:
        def step(record: RequestRecord) -> Reply:
            self.times.append(time.perf_counter())
            return reply
        return step


def script(n: int, tool_name: str, stamps: Stamps) -> list[Step]:
    """N tool-call steps then the final answer, each stamped on arrival."""
    steps = [stamps.wrap(tool_calls([(tool_name, {"argv": step_argv(i)})])) for i in range(n)]
    steps.append(stamps.wrap(text(FINAL)))
    return steps


@dataclass
class Served:
    """A scripted server in its own process: its URL, then (once stopped) what it saw."""

    url: str = ""
    times: list[float] = field(default_factory=list)
    unmatched: int = 0


def _serve(conn: Connection, n: int, tool_name: str) -> None:
    """The server process: serve the script until the parent says stop, then report."""
    stamps = Stamps()
    with ScriptedModelServer(script(n, tool_name, stamps)) as server:
        conn.send(server.url)
        conn.recv()
        unmatched = len(server.unmatched)
    conn.send((stamps.times, unmatched))


@contextmanager
def served(n: int, tool_name: str) -> Iterator[Served]:
    """:class:`ScriptedModelServer` with the N-step script, in a forked process.

    Out of process, the server's JSON parsing never holds this process's GIL while the loop under
    measure wants it (a real model API is remote too); ``perf_counter`` is system-wide, so its
    stamps still line up.
    """
    parent, child = _FORK.Pipe()
    process = _FORK.Process(target=_serve, args=(child, n, tool_name), daemon=True)
    process.start()
    found = Served()
    try:
        found.url = parent.recv()
        yield found
    finally:
        parent.send("stop")
        if parent.poll(10):
            found.times, found.unmatched = parent.recv()
        process.join(10)
        if process.is_alive():
            process.kill()
        parent.close()


def _cpu_s() -> float:
    """CPU seconds of this process and of its reaped children (the commands, the CLI)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


@dataclass(frozen=True)
class Clock:
    """Wall and CPU time since :meth:`start`."""

    wall: float
    cpu: float

    @classmethod
    def start(cls) -> Clock:
        return cls(time.perf_counter(), _cpu_s())

    def elapsed(self) -> tuple[float, float]:
        return time.perf_counter() - self.wall, _cpu_s() - self.cpu


@dataclass(frozen=True)
class RunTiming:
    """One measured run: wall and CPU time of N steps, the gaps between request arrivals.

    CPU time counts the whole process (the scripted server's thread too, the same work for every
    loop) and the reaped subprocesses; it moves much less than wall time with the machine's load.
    """

    steps: int
    total_s: float
    cpu_s: float
    gaps_ms: tuple[float, ...]

    @property
    def per_step_ms(self) -> float:
        return self.total_s * 1000 / self.steps

    @property
    def cpu_per_step_ms(self) -> float:
        return self.cpu_s * 1000 / self.steps

    @property
    def early_ms(self) -> float:
        """Median gap over the first :data:`WINDOW` steps (after the first request)."""
        return statistics.median(self.gaps_ms[:WINDOW]) if self.gaps_ms else float("nan")

    @property
    def late_ms(self) -> float:
        """Median gap over the last :data:`WINDOW` steps (up to the final answer's request)."""
        return statistics.median(self.gaps_ms[-WINDOW:]) if self.gaps_ms else float("nan")


def timing(n: int, elapsed: tuple[float, float], server: Served) -> RunTiming:
    times = server.times
    if len(times) != n + 1 or server.unmatched:
        raise RuntimeError(f"expected {n + 1} model requests, the server saw {len(times)} "
                           f"(and {server.unmatched} unmatched)")
    gaps = tuple((b - a) * 1000 for a, b in zip(times, times[1:], strict=False))
    return RunTiming(steps=n, total_s=elapsed[0], cpu_s=elapsed[1], gaps_ms=gaps)


class FloorCommand:
    """The floor's ``true``: the sandbox's own argv, spawned with the command domain's flags."""

    def __init__(self, sandbox: CommandSandbox, workspace: Path, scratch: Path) -> None:
        self.sandbox = sandbox
        self.workspace = workspace
        self.env = command_environment({}, scratch)

    def run(self, argv: list[str]) -> dict[str, Any]:
        """Run one command; answer a result shaped like the command domain's (same fields)."""
        started = time.monotonic()
        prepared = self.sandbox.prepare(argv, workspace=self.workspace, cwd=self.workspace,
                                        env=self.env)
        done = subprocess.run(
            prepared.argv, env=prepared.env, cwd=prepared.cwd, preexec_fn=prepared.preexec,
            stdin=subprocess.DEVNULL, capture_output=True, start_new_session=True,
            close_fds=True, check=False,
        )
        return {
            "exit_code": done.returncode, "signal": None,
            "stdout": done.stdout.decode("utf-8", "replace"),
            "stderr": done.stderr.decode("utf-8", "replace"), "truncated": False,
            "output_bytes": {"stdout": len(done.stdout), "stderr": len(done.stderr)},
            "timed_out": False, "timeout_s": 120.0,
            "duration_ms": round((time.monotonic() - started) * 1000, 3),
            "sandbox": self.sandbox.mode, "cwd": ".",
        }


def envelope(call_id: str, result: dict[str, Any]) -> dict[str, Any]:
    """A success envelope with the same fields the dispatcher answers."""
    return {"ok": True, "call_id": call_id, "tool_name": TOOL, "domain": "command",
            "operation": "run", "result": result, "duration_ms": result["duration_ms"],
            "request_id": "bench", "correlation_id": "bench"}


def median_of(runs: list[RunTiming], metric: Callable[[RunTiming], float]) -> float:
    return statistics.median(metric(r) for r in runs)
