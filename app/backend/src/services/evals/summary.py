"""An eval run summed up: per matrix cell, the pass rate with its Wilson interval, cost per
resolved task, tokens and turns; per item, what failed."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass
from typing import Any

from services.db.evals import EvalRepository, ItemRow, RunRow
from services.db.session import Database
from services.evals.errors import UNKNOWN_EVAL_RUN, EvalError
from services.evals.stats import wilson


@dataclass(frozen=True)
class CellSummary:
    cell: str
    items: int
    graded: int
    resolved: int
    pass_rate: float
    ci_low: float
    ci_high: float
    cost_usd: float
    cost_per_task: float
    cost_per_resolved: float | None
    tokens: int
    turns: int


@dataclass(frozen=True)
class RunSummary:
    run: RunRow
    cells: list[CellSummary]
    items: list[ItemRow]

    def task_outcomes(self) -> dict[str, bool]:
        """Per task: resolved in most of its graded attempts (the gate pairs these)."""
        votes: dict[str, list[bool]] = defaultdict(list)
        for item in self.items:
            if item.grade is not None:
                votes[item.key.task_id].append(item.grade.resolved)
        return {task: sum(v) * 2 > len(v) for task, v in votes.items()}

    def cost_per_task(self) -> float:
        graded = [i.grade for i in self.items if i.grade is not None]
        return sum(g.cost_usd for g in graded) / len(graded) if graded else 0.0

    def as_json(self) -> dict[str, Any]:
        run = self.run
        return {
            "id": run.id, "suite": run.suite, "source": run.source, "status": run.status,
            "created_at": run.created_at.isoformat(),
            "finished_at": run.finished_at.isoformat() if run.finished_at else None,
            "matrix": run.config.get("matrix"), "cells": [asdict(c) for c in self.cells],
            "items": [_item_json(i) for i in self.items]}


def _item_json(item: ItemRow) -> dict[str, Any]:
    data: dict[str, Any] = {"task_id": item.key.task_id, "cell": item.key.cell,
                            "repeat": item.key.repeat, "execution_id": item.execution_id,
                            "status": item.status}
    if item.grade is not None:
        data.update(asdict(item.grade))
    return data


def summarize_cell(cell: str, items: list[ItemRow]) -> CellSummary:
    graded = [i.grade for i in items if i.grade is not None]
    resolved = sum(1 for g in graded if g.resolved)
    cost = sum(g.cost_usd for g in graded)
    low, high = wilson(resolved, len(graded))
    return CellSummary(
        cell=cell, items=len(items), graded=len(graded), resolved=resolved,
        pass_rate=resolved / len(graded) if graded else 0.0, ci_low=low, ci_high=high,
        cost_usd=cost, cost_per_task=cost / len(graded) if graded else 0.0,
        cost_per_resolved=cost / resolved if resolved else None,
        tokens=sum(g.input_tokens + g.output_tokens for g in graded),
        turns=sum(g.turns for g in graded))


def summarize(db: Database, run_id: str) -> RunSummary:
    repository = EvalRepository(db)
    run = repository.get_run(run_id)
    if run is None:
        raise EvalError(UNKNOWN_EVAL_RUN, f"no eval run {run_id[:80]}")
    items = repository.items(run_id)
    by_cell: dict[str, list[ItemRow]] = defaultdict(list)
    for item in items:
        by_cell[item.key.cell].append(item)
    return RunSummary(run, [summarize_cell(c, v) for c, v in sorted(by_cell.items())], items)
