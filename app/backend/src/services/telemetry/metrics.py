"""The Prometheus families (``prometheus_client``), created on first use.

Every process records into the same names; a ``/metrics`` endpoint shows what its processes
recorded: ``studio worker --metrics-port`` serves its own, its pool processes' and its ``studio
execute`` children's (multiprocess mode: :func:`use_multiprocess_dir` before anything is
recorded, the directory inherited by every child), and the API serves its own (and, with no
broker, its children's) plus the gauges it reads from the database.

Labels are bounded: provider, model, tool domain and operation, outcome, status, reason; never an
id or a path. ``prometheus_client`` is imported on first use, so a command that records nothing
(``studio --help``, ``studio tools``) never loads it.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry, Counter, Histogram

# Seconds: a model call or a tool call takes from milliseconds to minutes, an execution longer.
CALL_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
EXECUTION_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200)
MULTIPROC_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"


def preload() -> None:
    """Import ``prometheus_client`` without recording anything (a worker's fork server, whose
    children record): its multiprocess mode is chosen from the environment at import, and the
    server's telemetry variables are its children's."""
    import prometheus_client  # noqa: F401


class Families:
    """The families this process records into."""

    def __init__(self) -> None:
        from prometheus_client import Counter, Histogram

        self.execution_duration: Histogram = Histogram(
            "studio_execution_duration_seconds",
            "Duration of one execution attempt (studio execute), by provider and outcome.",
            ["provider", "outcome"], buckets=EXECUTION_BUCKETS)
        self.model_call_duration: Histogram = Histogram(
            "studio_model_call_duration_seconds",
            "Latency of one model call (retries included), by provider and model.",
            ["provider", "model"], buckets=CALL_BUCKETS)
        self.tool_call_duration: Histogram = Histogram(
            "studio_tool_call_duration_seconds",
            "Latency of one tool call, by domain, operation and outcome (ok or the error code).",
            ["domain", "operation", "outcome"], buckets=CALL_BUCKETS)
        self.tokens: Counter = Counter(
            "studio_model_tokens", "Tokens used, by provider, model and kind (input, cached_input, "
            "cache_write, output).",
            ["provider", "model", "direction"])
        self.cost: Counter = Counter(
            "studio_model_cost_usd", "Cost of the model calls in USD, by provider and model.",
            ["provider", "model"])
        self.retries: Counter = Counter(
            "studio_model_retries", "Model calls retried after a transient failure.",
            ["provider"])
        self.execution_retries: Counter = Counter(
            "studio_execution_retries",
            "Execution attempts ended by an infrastructure error, by code and what followed "
            "(queued again, or dead_lettered).", ["code", "status"])
        self.lease_expirations: Counter = Counter(
            "studio_lease_expirations", "Leases the reaper found expired (a lost process).")
        self.resumes: Counter = Counter(
            "studio_execution_resumes", "Attempts that resumed an execution begun earlier.",
            ["provider"])
        self.reaper_dispatches: Counter = Counter(
            "studio_reaper_dispatches",
            "Executions the reaper dispatched again, by reason (expired, unclaimed).", ["reason"])
        self.executions_ended: Counter = Counter(
            "studio_execution_attempts_ended",
            "Execution attempts that ended in this deployment's processes, by final status.",
            ["status"])
        self.api_requests: Counter = Counter(
            "studio_api_requests", "HTTP requests served, by method and status class.",
            ["method", "status"])


@lru_cache(maxsize=1)
def families() -> Families:
    """The families of this process (created, and ``prometheus_client`` imported, once)."""
    return Families()


def use_multiprocess_dir(path: str | None) -> str:
    """Record in multiprocess mode into ``path`` (a fresh temporary directory when none);
    call before anything is recorded. Children started afterwards inherit the variable."""
    directory = path
    if directory is None:  # ours: removed when this process exits
        directory = tempfile.mkdtemp(prefix="studio-metrics-")
        atexit.register(shutil.rmtree, directory, ignore_errors=True)
    os.environ[MULTIPROC_VARIABLE] = directory
    return directory


def registry(multiprocess_dir: str | None) -> CollectorRegistry:
    """What a ``/metrics`` endpoint shows: every process's files in multiprocess mode, else
    this process's families."""
    from prometheus_client import REGISTRY, CollectorRegistry
    from prometheus_client.multiprocess import MultiProcessCollector

    if multiprocess_dir is None:
        families()  # the families exist (at zero) before anything is recorded
        return REGISTRY
    collected = CollectorRegistry()
    MultiProcessCollector(collected, path=multiprocess_dir)  # type: ignore[no-untyped-call]
    return collected


def exposition(multiprocess_dir: str | None, *extra: Any) -> bytes:
    """The text exposition of :func:`registry` and ``extra`` collectors."""
    from prometheus_client import CollectorRegistry, generate_latest

    body = generate_latest(registry(multiprocess_dir))
    if extra:
        more = CollectorRegistry(auto_describe=False)
        for collector in extra:
            more.register(collector)
        body += generate_latest(more)
    return body


def serve(port: int, multiprocess_dir: str | None, addr: str = "0.0.0.0") -> None:
    """Serve :func:`registry` on ``port`` from a daemon thread (``studio worker``)."""
    from prometheus_client import start_http_server

    start_http_server(port, addr=addr, registry=registry(multiprocess_dir))
