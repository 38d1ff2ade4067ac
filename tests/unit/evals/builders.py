"""Eval rows built in memory for the pure parts (summaries, reports, the gate)."""

from __future__ import annotations

from datetime import UTC, datetime

from services.db.evals import Grade, ItemKey, ItemRow, RunRow
from services.evals.summary import RunSummary, summarize_cell

NOW = datetime(2026, 11, 28, tzinfo=UTC)


def item(task: str, resolved: bool, *, cell: str = "replay/replay/-", repeat: int = 0,
         cost: float = 0.0, failed: tuple[str, ...] = ()) -> ItemRow:
    grade = Grade(resolved, tests_failed=list(failed), cost_usd=cost, turns=2)
    return ItemRow(f"{task}-{cell}-{repeat}", ItemKey(task, cell, repeat), None, "graded",
                   grade, NOW)


def summary(run_id: str, items: list[ItemRow], suite: str = "s") -> RunSummary:
    run = RunRow(run_id, suite, "/x", {}, "finished", NOW, NOW)
    cells = sorted({i.key.cell for i in items})
    return RunSummary(run, [summarize_cell(c, [i for i in items if i.key.cell == c])
                            for c in cells], items)
