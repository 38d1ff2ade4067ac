"""Running an eval: every (task, cell, repeat) item as an ordinary execution, then graded.

:class:`EvalRunner` records the run and its items (:class:`services.db.evals.EvalRepository`),
prepares each task's repository once (:mod:`services.evals.fixtures`), and runs the items that
have no grade yet, ``concurrency`` at a time. An item's execution is created through
:class:`services.runs.service.ExecutionService` (the one entry point), linked to the item before
it is handed to ``dispatch`` (the worker's dispatcher, injected by the CLI: a Celery task when a
broker is configured, a ``studio execute`` child of this process otherwise), and awaited until it
is final; then :class:`services.evals.grader.Grader` grades it and the grade is written once.

Resuming (the same run id again, after the eval process was killed): graded items are skipped;
an item whose execution exists is not given a new one: its execution is awaited (dispatched
again while it is not final: the durable path resumes it from its checkpoint, or does nothing
while another process holds its lease) and graded. So no task runs twice.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from services.db.evals import EvalRepository, Grade, ItemKey, ItemRow
from services.db.executions import ExecutionRepository
from services.db.models import NodeExecution
from services.db.session import Database
from services.db.status import FINAL_STATUSES, ExecutionStatus
from services.db.teams import TeamStore
from services.evals.errors import (
    EVAL_MISMATCH,
    NO_REPLAY_SCRIPT,
    UNKNOWN_EVAL_RUN,
    EvalError,
)
from services.evals.fixtures import BASE_BRANCH, TaskRepo, prepare_repo
from services.evals.grader import Grader
from services.evals.matrix import Cell, Matrix, matrix_from_json
from services.evals.suite import EvalTask, Suite
from services.execution.errors import StudioError
from services.runs.request import ExecutionRequest
from services.runs.service import ExecutionService
from services.settings import StudioSettings

log = logging.getLogger(__name__)

Dispatch = Callable[[str], object]
"""Hand a recorded (committed) execution to whoever runs it; may return before it ends."""


@dataclass(frozen=True)
class RunnerOptions:
    concurrency: int = 2
    poll_s: float = 0.5
    # a broker's worker claims a sent execution a little later: its lapsed lease is not sent
    # again before this long
    redispatch_s: float = 10.0
    on_graded: Callable[[ItemKey, Grade], None] | None = None


class EvalRunner:
    def __init__(self, db: Database, settings: StudioSettings, dispatch: Dispatch,
                 options: RunnerOptions | None = None, team_id: str | None = None) -> None:
        self.db = db
        self.settings = settings
        self.dispatch = dispatch
        self.options = options or RunnerOptions()
        self.evals = EvalRepository(db)
        self.executions = ExecutionRepository(db)
        self.team_id = team_id  # a new run's team (None: the default team)
        self.service = ExecutionService(db, settings)
        self.grader = Grader(settings)

    def start(self, suite: Suite, matrix: Matrix, run_id: str | None = None) -> str:
        """Record the run (or find it again: the same id resumes it) and its items."""
        config = {"matrix": matrix.as_json(), "fingerprint": suite.fingerprint(),
                  "concurrency": self.options.concurrency}
        existing = self.evals.get_run(run_id) if run_id is not None else None
        if existing is not None:
            if existing.config.get("fingerprint") != config["fingerprint"] or \
                    existing.config.get("matrix") != config["matrix"]:
                raise EvalError(EVAL_MISMATCH, f"eval run {run_id} was started with another "
                                               "suite or matrix; it cannot resume with this one")
        else:
            run_id = self.evals.create_run(suite.name, suite.source, config, run_id,
                                           self.team_id or TeamStore(self.db).default_team_id())
        assert run_id is not None
        self.evals.ensure_items(run_id, [ItemKey(t.id, c.name, r) for t in suite.tasks
                                         for c in matrix.cells for r in range(matrix.repeat)])
        return run_id

    def run(self, run_id: str, suite: Suite) -> list[ItemRow]:
        """Run every item without a grade; answers all the run's items."""
        row = self.evals.get_run(run_id)
        if row is None:
            raise EvalError(UNKNOWN_EVAL_RUN, f"no eval run {run_id}")
        # its executions belong to the run's team (a resumed run keeps the team it started in)
        self.service = ExecutionService(self.db, self.settings, team_id=row.team_id)
        cells = {c.name: c for c in matrix_from_json(row.config["matrix"]).cells}
        pending = [i for i in self.evals.items(run_id) if i.status != "graded"]
        repos = {t.id: prepare_repo(t, self.repo_root(run_id))
                 for t in suite.tasks if any(i.key.task_id == t.id for i in pending)}
        with ThreadPoolExecutor(max_workers=self.options.concurrency,
                                thread_name_prefix="studio-eval") as pool:
            futures = [pool.submit(self._item, item, suite.task(item.key.task_id),
                                   cells[item.key.cell], repos[item.key.task_id])
                       for item in pending]
            for future in futures:
                future.result()
        self.evals.finish_run(run_id)
        return self.evals.items(run_id)

    def repo_root(self, run_id: str) -> Path:
        return Path(self.settings.data_dir) / "evals" / run_id

    def _item(self, item: ItemRow, task: EvalTask, cell: Cell, repo: TaskRepo) -> None:
        execution_id = item.execution_id
        if execution_id is None:
            if cell.provider == "replay" and task.replay is None:
                self._write(item, Grade(False, error_code=NO_REPLAY_SCRIPT,
                                        detail="the task has no replay trajectory"))
                return
            try:
                execution_id = self.service.create(self._request(task, cell, repo))
            except StudioError as exc:  # refused before it ran (a budget, a repository rule)
                self._write(item, Grade(False, error_code=exc.code.value,
                                        detail=exc.message[:2000]))
                return
            self.evals.link_execution(item.id, execution_id)
        execution = self._await(execution_id)
        graded = self.grader.grade(task, repo, _head(execution))
        self._write(item, Grade(
            graded.resolved, graded.passed, graded.failed, cost_usd=execution.cost_usd,
            input_tokens=_usage(execution, "input_tokens"),
            output_tokens=_usage(execution, "output_tokens"), turns=execution.iterations,
            duration_s=_duration(execution),
            error_code=graded.error_code or execution.error_code,
            detail=graded.detail or _short(execution.error_message)))

    def _write(self, item: ItemRow, grade: Grade) -> None:
        if self.evals.grade(item.id, grade) and self.options.on_graded is not None:
            self.options.on_graded(item.key, grade)

    def _request(self, task: EvalTask, cell: Cell, repo: TaskRepo) -> ExecutionRequest:
        return ExecutionRequest(
            provider=cell.provider, prompt=task.prompt, repo_url=str(repo.bare),
            model=cell.model, base_branch=BASE_BRANCH, pull_request=False,
            script=task.replay if cell.provider == "replay" else None, allow_local=True,
            profile=cell.profile(), setup=task.setup, network=task.network,
            network_allowlist=task.network_allowlist, slug=f"eval-{task.id}"[:40])

    def _await(self, execution_id: str) -> NodeExecution:
        """The execution once final: dispatched, and dispatched again whenever its lease has
        expired (the process that held it died: the durable path resumes it)."""
        dispatched_at: float | None = None
        while True:
            row = self.executions.get(execution_id)
            assert row is not None  # created above, or linked by an earlier attempt
            if ExecutionStatus(row.status) in FINAL_STATUSES:
                return row
            lapsed = (row.lease_expires_at is not None
                      and row.lease_expires_at.timestamp() < time.time())
            if dispatched_at is None or (
                    lapsed and time.monotonic() - dispatched_at >= self.options.redispatch_s):
                dispatched_at = time.monotonic()
                self.dispatch(execution_id)  # runs it here (no broker) or sends it
            time.sleep(self.options.poll_s)


def _head(execution: NodeExecution) -> str | None:
    return execution.head_sha


def _usage(execution: NodeExecution, key: str) -> int:
    usage: dict[str, Any] = execution.usage or {}
    value = usage.get(key, 0)
    return int(value) if isinstance(value, int | float) else 0


def _duration(execution: NodeExecution) -> float:
    if execution.started_at is None or execution.finished_at is None:
        return 0.0
    return max(0.0, (execution.finished_at - execution.started_at).total_seconds())


def _short(text: str | None) -> str | None:
    return None if text is None else text[:2000]
