"""Node executions, their append-only event journal, and the tool-call evidence."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    Float,
    ForeignKey,
    Integer,
    LargeBinary,
    String,
    Text,
)
from sqlalchemy.orm import Mapped, mapped_column

from services.db.base import Base, UTCDateTime, utcnow
from services.db.models.flowcharts import new_id
from services.db.models.team_owned import TeamOwned


class NodeExecution(TeamOwned, Base):
    """One agent execution: what was asked, under which settings, and how it ended.

    ``event_seq`` is the last journal sequence number handed out (the per-execution counter);
    the ``lease_*`` columns are for the executor's lease and heartbeat. ``request`` holds what
    ``studio execute`` needs beyond the columns (replay script, pull-request flag, GitHub
    repository override, branch slug); ``pr_number``/``pr_url`` are the pull-request ledger.
    """

    __tablename__ = "node_executions"

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    flowchart_run_id: Mapped[str | None] = mapped_column(
        ForeignKey("flowchart_runs.id", ondelete="SET NULL"), index=True
    )
    node_id: Mapped[str | None] = mapped_column(ForeignKey("nodes.id", ondelete="SET NULL"))
    status: Mapped[str] = mapped_column(String(32), default="queued", index=True)
    runtime: Mapped[str] = mapped_column(String(32), default="agent")
    provider: Mapped[str] = mapped_column(String(64))
    model: Mapped[str] = mapped_column(String(200))
    repo_url: Mapped[str | None] = mapped_column(Text)
    workspace: Mapped[str | None] = mapped_column(Text)
    base_branch: Mapped[str | None] = mapped_column(String(255))
    branch: Mapped[str | None] = mapped_column(String(255))
    base_commit: Mapped[str | None] = mapped_column(String(64))
    head_sha: Mapped[str | None] = mapped_column(String(64))
    pr_url: Mapped[str | None] = mapped_column(Text)
    pr_number: Mapped[int | None] = mapped_column(Integer)
    request: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    prompt: Mapped[str] = mapped_column(Text)
    limits: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    settings_snapshot: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    outcome: Mapped[str | None] = mapped_column(String(64))
    result: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    usage: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    cost_usd: Mapped[float] = mapped_column(Float, default=0.0)
    iterations: Mapped[int] = mapped_column(Integer, default=0)
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    event_seq: Mapped[int] = mapped_column(Integer, default=0)
    lease_owner: Mapped[str | None] = mapped_column(String(255))
    lease_epoch: Mapped[int] = mapped_column(Integer, default=0)
    # attempts that ended on purpose (a kill-switch pause, a wait for an approval), not by a
    # lost process: the reaper's ``max_attempts`` counts only the others (see runs.reaper)
    yielded_attempts: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    lease_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    dispatched_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    # ``killswitch`` while the kill switch holds the execution back, queued (see db.pauses)
    paused_reason: Mapped[str | None] = mapped_column(String(32))
    paused_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    error_code: Mapped[str | None] = mapped_column(String(64))
    error_message: Mapped[str | None] = mapped_column(Text)
    # retries of infrastructure errors (services.runs.retries): when the next attempt is due,
    # the last error, every failed attempt's error, the operators' retries and discards
    retry_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), index=True)
    last_error: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    attempt_errors: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON)
    operator_actions: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON)
    # the workspace's own disk use when provisioned (services.repos.workspaces.disk_use)
    workspace_disk: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, index=True)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, onupdate=utcnow)
    # who created it: the API token (id and name), ``cli:<user>``, or the run that started it
    created_by_token: Mapped[str | None] = mapped_column(String(36))
    created_by: Mapped[str | None] = mapped_column(String(255))


class ExecutionEvent(Base):
    """The append-only journal: ``seq`` runs 1, 2, 3, ... without gaps per execution.

    The primary key ``(execution_id, seq)`` is the uniqueness the journal relies on.
    ``data`` is stored redacted.
    """

    __tablename__ = "execution_events"

    execution_id: Mapped[str] = mapped_column(
        ForeignKey("node_executions.id", ondelete="CASCADE"), primary_key=True
    )
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(String(32))
    cycle: Mapped[int] = mapped_column(Integer, default=0)
    data: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class ToolCallRecord(Base):
    """Evidence of one tool call, keyed ``(execution_id, call_id)``; also the idempotency store.

    ``envelope`` (redacted) is set once, by whichever writer comes first, and never overwritten.
    """

    __tablename__ = "tool_calls"

    execution_id: Mapped[str] = mapped_column(
        ForeignKey("node_executions.id", ondelete="CASCADE"), primary_key=True
    )
    call_id: Mapped[str] = mapped_column(String(255), primary_key=True)
    cycle: Mapped[int | None] = mapped_column(Integer)
    provider: Mapped[str | None] = mapped_column(String(64))
    tool_name: Mapped[str] = mapped_column(String(128))
    domain: Mapped[str] = mapped_column(String(64))
    operation: Mapped[str] = mapped_column(String(128))
    args: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    envelope: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    ok: Mapped[bool | None] = mapped_column(Boolean)
    error_code: Mapped[str | None] = mapped_column(String(64))
    duration_ms: Mapped[float | None] = mapped_column(Float)
    request_id: Mapped[str | None] = mapped_column(String(255))
    correlation_id: Mapped[str | None] = mapped_column(String(255))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    # the approval gate's decision on this call (rule, decision, by whom, when, reason)
    approval: Mapped[dict[str, Any] | None] = mapped_column(JSON)


class WorkspaceCheckpoint(Base):
    """A checkpoint of an execution's workspace: its changes against the base commit.

    ``patch`` is ``git diff --binary <base_commit>`` of the whole worktree (committed, staged,
    unstaged and untracked changes), or ``NULL`` with ``available`` false when it was over the
    size cap. ``call_id`` is the tool call after which it was taken (stored in the same
    transaction as that call's envelope); ``lease_epoch`` and ``owner`` name the attempt (lease
    epoch, ``host:pid:random``) that took it.
    """

    __tablename__ = "workspace_checkpoints"

    execution_id: Mapped[str] = mapped_column(
        ForeignKey("node_executions.id", ondelete="CASCADE"), primary_key=True
    )
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    call_id: Mapped[str | None] = mapped_column(String(255))
    base_commit: Mapped[str] = mapped_column(String(64))
    available: Mapped[bool] = mapped_column(Boolean, default=True)
    size_bytes: Mapped[int] = mapped_column(Integer, default=0)
    sha256: Mapped[str] = mapped_column(String(64))
    patch: Mapped[bytes | None] = mapped_column(LargeBinary)
    lease_epoch: Mapped[int | None] = mapped_column(Integer)
    owner: Mapped[str | None] = mapped_column(String(255))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class ContentBlob(Base):
    """A large string of an execution's records, stored once (:mod:`services.db.blobs`).

    ``digest`` is the SHA-256 of the UTF-8 text, ``size_bytes`` its length, ``data`` the text
    compressed with zlib.
    """

    __tablename__ = "content_blobs"

    execution_id: Mapped[str] = mapped_column(
        ForeignKey("node_executions.id", ondelete="CASCADE"), primary_key=True
    )
    digest: Mapped[str] = mapped_column(String(64), primary_key=True)
    size_bytes: Mapped[int] = mapped_column(Integer)
    data: Mapped[bytes] = mapped_column(LargeBinary)
