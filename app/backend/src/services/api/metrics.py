"""Prometheus text exposition (format 0.0.4), written by hand: a few families, no client library.

``studio_executions`` (gauge, by ``status``): executions recorded in the database now;
``studio_executions_finished_total`` (counter, by final ``status``): a final status never changes,
so this one only grows;
``studio_tool_calls_total`` (counter, by ``outcome``: ``ok``, an error code, or ``pending``);
``studio_api_requests_total`` (counter, by ``method`` and ``status`` class) of this process.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable, Mapping

from services.db.status import FINAL_STATUSES as FINAL
from services.db.status import ExecutionStatus

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
EXECUTION_STATUSES = tuple(status.value for status in ExecutionStatus)
FINAL_STATUSES = tuple(status.value for status in ExecutionStatus if status in FINAL)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(labels: Mapping[str, str]) -> str:
    inner = ",".join(f'{name}="{_escape(value)}"' for name, value in labels.items())
    return "{" + inner + "}" if inner else ""


def family(name: str, kind: str, help_text: str,
           samples: Iterable[tuple[Mapping[str, str], float]]) -> list[str]:
    lines = [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
    lines += [f"{name}{_labels(labels)} {value:g}" for labels, value in samples]
    return lines


class RequestCounter:
    """Requests served by this process, by method and status class (``2xx``, ``4xx``, ...)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[tuple[str, str]] = Counter()

    def add(self, method: str, status: int) -> None:
        with self._lock:
            self._counts[(method, f"{status // 100}xx")] += 1

    def samples(self) -> list[tuple[Mapping[str, str], float]]:
        with self._lock:
            items = sorted(self._counts.items())
        return [({"method": method, "status": status}, float(count))
                for (method, status), count in items]


def exposition(executions: Mapping[str, int], tool_calls: Mapping[str, int],
               requests: RequestCounter) -> str:
    statuses = sorted(set(EXECUTION_STATUSES) | set(executions))
    lines = family("studio_executions", "gauge", "Executions recorded, by status.",
                   [({"status": s}, float(executions.get(s, 0))) for s in statuses])
    lines += family("studio_executions_finished_total", "counter",
                    "Executions that ended, by final status.",
                    [({"status": s}, float(executions.get(s, 0))) for s in FINAL_STATUSES])
    lines += family("studio_tool_calls_total", "counter", "Tool calls recorded, by outcome.",
                    [({"outcome": o}, float(n)) for o, n in sorted(tool_calls.items())])
    lines += family("studio_api_requests_total", "counter",
                    "HTTP requests served by this process.", requests.samples())
    return "\n".join(lines) + "\n"
