"""``ExecutionRepository``: create, run, finish and read node executions and their evidence.

Each method is one transaction. Free text that may carry secrets (prompt, repository URL, result,
error message) goes through the :class:`~services.db.redaction.Redactor` before it is stored.
Rows come back detached (readable after their session closed); :func:`execution_to_json` and
:func:`tool_call_to_json` give their public JSON form.
"""

from __future__ import annotations

import builtins
from typing import Any

from sqlalchemy import or_, select, update
from sqlalchemy.orm.attributes import set_committed_value

from services.db.base import utcnow
from services.db.blobs import externalize, hydrate
from services.db.connection_loss import rerun
from services.db.errors import NotFound
from services.db.models import ExecutionEvent, NodeExecution, ToolCallRecord
from services.db.redaction import Redactor
from services.db.session import Database
from services.db.status import FINAL_STATUSES, ExecutionStatus, held_by_killswitch


class UnknownExecution(NotFound):
    """No execution has this id."""

    what = "execution"


class ExecutionRepository:
    """The executions' rows. Reading needs nothing more; :meth:`create` and :meth:`finish`
    store text a run produced and so need the run's ``redactor``, given by the caller (there
    is no default: one built here could only guess the run's secrets)."""

    def __init__(self, db: Database, redactor: Redactor | None = None) -> None:
        self._db = db
        self._given_redactor = redactor

    @property
    def _redactor(self) -> Redactor:
        if self._given_redactor is None:
            raise TypeError("this ExecutionRepository writes text and was given no redactor")
        return self._given_redactor

    def create(
        self,
        *,
        provider: str,
        model: str,
        prompt: str,
        repo_url: str | None = None,
        workspace: str | None = None,
        base_branch: str | None = None,
        branch: str | None = None,
        limits: dict[str, Any] | None = None,
        settings_snapshot: dict[str, Any] | None = None,
        runtime: str = "agent",
        flowchart_run_id: str | None = None,
        node_id: str | None = None,
        request: dict[str, Any] | None = None,
        team_id: str | None = None,
        created_by: tuple[str | None, str | None] = (None, None),
    ) -> str:
        """Record a queued execution; answers its id (a uuid4 string). ``request`` is what a
        durable execution was asked to do (:mod:`services.runs.request`), stored redacted."""
        redact = self._redactor
        row = NodeExecution(
            provider=provider, model=model, prompt=redact.text(prompt),
            repo_url=redact.text(repo_url) if repo_url else None, workspace=workspace,
            base_branch=base_branch, branch=branch, limits=redact.data(limits or {}),
            settings_snapshot=redact.data(settings_snapshot or {}), runtime=runtime,
            flowchart_run_id=flowchart_run_id, node_id=node_id, status=ExecutionStatus.QUEUED,
            team_id=team_id, created_by_token=created_by[0], created_by=created_by[1],
        )
        with self._db.session() as session:
            session.add(row)
            if request is not None:  # its large strings (a replay script) stored once
                session.flush()
                row.request = externalize(session, row.id, redact.data(request))
        return row.id

    def _update(self, execution_id: str, **values: Any) -> None:
        with self._db.session() as session:
            result = session.execute(
                update(NodeExecution).where(NodeExecution.id == execution_id)
                .values(updated_at=utcnow(), **values)
            )
            if result.rowcount == 0:  # type: ignore[attr-defined]
                raise UnknownExecution(execution_id)

    def mark_running(
        self, execution_id: str, *, base_commit: str | None = None, branch: str | None = None,
        workspace: str | None = None,
    ) -> None:
        """``running`` from now; optional facts known once the workspace is provisioned."""
        values: dict[str, Any] = {"status": ExecutionStatus.RUNNING, "started_at": utcnow(),
                                  "paused_reason": None, "paused_at": None}
        for key, value in (("base_commit", base_commit), ("branch", branch),
                           ("workspace", workspace)):
            if value is not None:
                values[key] = value
        self._update(execution_id, **values)

    def record(self, execution_id: str, *, head_sha: str | None = None,
               pr_url: str | None = None, branch: str | None = None) -> None:
        """Facts learned while finalizing (the pushed head, the pull request)."""
        values = {k: v for k, v in (("head_sha", head_sha), ("pr_url", pr_url),
                                    ("branch", branch)) if v is not None}
        if values:
            self._update(execution_id, **values)

    def finish(
        self,
        execution_id: str,
        *,
        status: str,
        outcome: str,
        result: dict[str, Any] | None = None,
        usage: dict[str, Any] | None = None,
        cost_usd: float = 0.0,
        iterations: int = 0,
        error_code: str | None = None,
        error_message: str | None = None,
    ) -> None:
        """Record the end: ``status`` is one of :data:`FINAL_STATUSES`."""
        if status not in FINAL_STATUSES:
            raise ValueError(f"status must be one of {sorted(FINAL_STATUSES)}, not {status!r}")
        redact = self._redactor
        self._update(
            execution_id, status=status, outcome=outcome, result=redact.data(result),
            usage=usage, cost_usd=cost_usd, iterations=iterations, error_code=error_code,
            error_message=redact.text(error_message) if error_message else None,
            finished_at=utcnow(),
        )

    def request_cancel(self, execution_id: str) -> None:
        """Ask a running execution to stop; its ``RunControl`` answers ``cancelled``."""
        self._update(execution_id, cancel_requested=True)

    def get(self, execution_id: str) -> NodeExecution | None:
        return rerun("execution read", lambda: self._get(execution_id))

    def _get(self, execution_id: str) -> NodeExecution | None:
        with self._db.read_session() as session:
            row = session.get(NodeExecution, execution_id)
            if row is None:
                return None
            (request,) = hydrate(session, execution_id, [row.request])
        set_committed_value(row, "request", request)
        return row

    def list(self, *, limit: int = 50, status: str | None = None, offset: int = 0,
             provider: str | None = None, repo_url: str | None = None,
             flowchart_run_id: str | None = None, kind: str | None = None,
             search: str | None = None,
             team_id: str | None = None) -> builtins.list[NodeExecution]:
        """The most recent executions first, ``offset`` skipped; filtered by status, provider,
        repository, flowchart run, ``kind`` (``standalone``: no flowchart run; ``node``: a
        flowchart node's) and ``search`` (an id prefix, or part of the branch name; matched as
        text, never as a pattern)."""
        query = (select(NodeExecution)
                 .order_by(NodeExecution.created_at.desc(), NodeExecution.id)
                 .offset(offset).limit(limit))
        if status is not None:
            query = query.where(NodeExecution.status == status)
        if provider is not None:
            query = query.where(NodeExecution.provider == provider)
        if repo_url is not None:
            query = query.where(NodeExecution.repo_url == repo_url)
        if flowchart_run_id is not None:
            query = query.where(NodeExecution.flowchart_run_id == flowchart_run_id)
        if kind == "standalone":
            query = query.where(NodeExecution.flowchart_run_id.is_(None))
        elif kind == "node":
            query = query.where(NodeExecution.flowchart_run_id.is_not(None))
        if team_id is not None:
            query = query.where(NodeExecution.team_id == team_id)
        if search:
            query = query.where(or_(
                NodeExecution.id.startswith(search, autoescape=True),
                NodeExecution.branch.contains(search, autoescape=True)))
        with self._db.read_session() as session:
            return builtins.list(session.scalars(query))

    def events(self, execution_id: str, *, after_seq: int = 0) -> builtins.list[ExecutionEvent]:
        """Journal entries after ``after_seq``, in order (what a resumed stream replays)."""
        query = (select(ExecutionEvent)
                 .where(ExecutionEvent.execution_id == execution_id, ExecutionEvent.seq > after_seq)
                 .order_by(ExecutionEvent.seq))

        def read() -> tuple[builtins.list[ExecutionEvent], builtins.list[Any]]:
            with self._db.read_session() as session:
                rows = builtins.list(session.scalars(query))
                return rows, hydrate(session, execution_id, [row.data for row in rows])

        rows, data = rerun("journal read", read)
        for row, value in zip(rows, data, strict=True):
            set_committed_value(row, "data", value)
        return rows

    def tool_calls(self, execution_id: str) -> builtins.list[ToolCallRecord]:
        query = (select(ToolCallRecord).where(ToolCallRecord.execution_id == execution_id)
                 .order_by(ToolCallRecord.cycle, ToolCallRecord.created_at))
        with self._db.read_session() as session:
            rows = builtins.list(session.scalars(query))
            found = hydrate(session, execution_id, [[row.args, row.envelope] for row in rows])
        for row, (args, envelope) in zip(rows, found, strict=True):
            set_committed_value(row, "args", args)
            set_committed_value(row, "envelope", envelope)
        return rows


def _when(value: Any) -> str | None:
    return value.isoformat() if value is not None else None


def execution_to_json(row: NodeExecution) -> dict[str, Any]:
    """The public form of an execution (no lease internals)."""
    fields = ("id", "status", "runtime", "provider", "model", "repo_url", "workspace",
              "base_branch", "branch", "base_commit", "head_sha", "pr_url", "prompt", "limits",
              "settings_snapshot", "outcome", "result", "usage", "cost_usd", "iterations",
              "cancel_requested", "error_code", "error_message", "flowchart_run_id", "node_id",
              "team_id", "created_by")
    data = {name: getattr(row, name) for name in fields}
    for name in ("created_at", "started_at", "finished_at"):
        data[name] = _when(getattr(row, name))
    # ``killswitch`` while the kill switch holds it back, queued (services.db.pauses)
    held = held_by_killswitch(row.status, row.paused_reason)
    data["paused_reason"] = row.paused_reason if held else None
    data["paused_at"] = _when(row.paused_at) if held else None
    # queued behind its team's concurrency limit (services.db.team_admission)
    data["waiting_reason"] = (row.paused_reason if row.status == ExecutionStatus.QUEUED
                              and row.paused_reason == "team_concurrency" else None)
    # retries and the dead-letter queue (services.runs.retries)
    data["retry_at"] = _when(row.retry_at) if row.status == "queued" else None
    data["last_error"] = row.last_error
    data["attempt_errors"] = list(row.attempt_errors or [])
    data["operator_actions"] = list(row.operator_actions or [])
    # the workspace's own disk use when provisioned (services.repos.workspaces.disk_use)
    data["workspace_disk"] = row.workspace_disk
    return data


def tool_call_to_json(row: ToolCallRecord) -> dict[str, Any]:
    fields = ("call_id", "cycle", "provider", "tool_name", "domain", "operation", "args", "ok",
              "error_code", "duration_ms", "request_id", "correlation_id", "envelope")
    data = {name: getattr(row, name) for name in fields}
    data["created_at"], data["finished_at"] = _when(row.created_at), _when(row.finished_at)
    data["approval"] = row.approval
    return data
