"""Where an execution's wall time goes in a ``bench/scale.py`` round (``--timeline``).

From the timestamps the product already writes (no instrumentation of its own): the row's
``created_at`` (the API's ``POST``), ``dispatched_at``, ``started_at`` (the child claimed it),
``finished_at``, and every journal event's ``created_at``, as seconds after the round's first
``POST``. Printed per milestone: the earliest, the median and the latest over the round's
executions, and for consecutive milestones the median and the largest gap, so that a stage whose
latest grows with N (a queue) shows apart from one every execution spends in parallel.
"""

from __future__ import annotations

import json
import re
import statistics
from collections import defaultdict
from datetime import datetime
from pathlib import Path

from sqlalchemy import select, text

from services.db.models import ExecutionEvent, NodeExecution
from services.db.session import Database


def _s(at: datetime | None, origin: float) -> float | None:
    return None if at is None else at.timestamp() - origin


def milestones(db: Database, ids: list[str], origin: float) -> dict[str, dict[str, float]]:
    """Per execution, each milestone's seconds after ``origin`` (the n-th event of a kind is
    ``kind#n``; the first model answers and the last are what matter, all are kept)."""
    out: dict[str, dict[str, float]] = defaultdict(dict)
    with db.read_session() as session:
        for row in session.execute(select(
                NodeExecution.id, NodeExecution.created_at, NodeExecution.dispatched_at,
                NodeExecution.started_at, NodeExecution.finished_at).where(
                    NodeExecution.id.in_(ids))):
            for name, at in zip(("created", "dispatched", "started", "finished"), row[1:],
                                strict=True):
                value = _s(at, origin)
                if value is not None:
                    out[row[0]][name] = value
        seen: dict[tuple[str, str], int] = defaultdict(int)
        for execution_id, kind, at in session.execute(select(
                ExecutionEvent.execution_id, ExecutionEvent.kind, ExecutionEvent.created_at).where(
                    ExecutionEvent.execution_id.in_(ids)).order_by(
                        ExecutionEvent.execution_id, ExecutionEvent.seq)):
            seen[(execution_id, kind)] += 1
            value = _s(at, origin)
            if value is not None:
                out[execution_id][f"{kind}#{seen[(execution_id, kind)]}"] = value
    return out


FORKED = re.compile(r"fork server: execution (\S+) runs as pid")
RECEIVED = re.compile(r"Task \S+ received")


def worker_log(log: Path, ids: list[str], origin: float,
               per: dict[str, dict[str, float]]) -> list[float]:
    """Add each execution's ``forked`` (the worker's ``runs as pid`` line) to ``per``; answer
    the times of the worker's ``received`` lines (Celery names the task, not the execution).
    The worker's log is JSON lines (:mod:`services.logs`)."""
    received: list[float] = []
    wanted = set(ids)
    for line in log.read_text(errors="replace").splitlines():
        try:
            record = json.loads(line)
            at = datetime.fromisoformat(record["ts"]).timestamp() - origin
            message = str(record["message"])
        except (ValueError, KeyError, TypeError):
            continue
        if RECEIVED.search(message):
            received.append(at)
        forked = FORKED.search(message)
        if forked is not None and forked.group(1) in wanted:
            per[forked.group(1)]["forked"] = at
    return received


def pg_counts(db: Database) -> tuple[int, int]:
    """This database's sessions opened and transactions committed so far
    (``pg_stat_database``, PostgreSQL 14 and later; flushed by each backend within a second)."""
    with db.read_session() as session:
        row = session.execute(text(
            "SELECT sessions, xact_commit FROM pg_stat_database "
            "WHERE datname = current_database()")).one()
    return int(row[0]), int(row[1])


def print_timeline(db: Database, ids: list[str], origin: float, log: Path | None = None,
                   counts: tuple[int, int] | None = None) -> None:
    """The round's timeline; nothing when ``counts`` is None (``bench/scale.py`` without
    ``--timeline``)."""
    if counts is None:
        return
    per = milestones(db, ids, origin)
    received = worker_log(log, ids, origin, per) if log is not None else []
    if received:
        print(f"    the worker's 'received' lines: {len(received)}, first {min(received):.2f} "
              f"s, median {statistics.median(received):.2f} s, last {max(received):.2f} s")
    if counts:
        sessions, commits = (after - before for after, before in
                             zip(pg_counts(db), counts, strict=True))
        print(f"    PostgreSQL (pg_stat_database, this round): {sessions / len(ids):.1f} "
              f"sessions and {commits / len(ids):.1f} commits per execution")
    names: dict[str, list[float]] = defaultdict(list)
    for marks in per.values():
        for name, value in marks.items():
            names[name].append(value)
    order = sorted(names, key=lambda k: statistics.median(names[k]))
    print(f"    timeline over {len(per)} executions (s after the first POST): "
          "milestone  earliest  median  latest  n")
    for name in order:
        values = names[name]
        print(f"      {name:28s} {min(values):7.2f} {statistics.median(values):7.2f} "
              f"{max(values):7.2f}  {len(values)}")
    gaps: dict[tuple[str, str], list[float]] = defaultdict(list)
    for marks in per.values():
        ranked = sorted(marks.items(), key=lambda kv: kv[1])
        for (a, ta), (b, tb) in zip(ranked, ranked[1:], strict=False):
            gaps[(a.split("#")[0], b.split("#")[0])].append(tb - ta)
    print("    gaps between consecutive milestones: median  largest  count")
    for (a, b), values in sorted(gaps.items(), key=lambda kv: -sum(kv[1])):
        print(f"      {a:>20s} -> {b:<20s} {statistics.median(values):6.2f} "
              f"{max(values):6.2f}  {len(values)}")
