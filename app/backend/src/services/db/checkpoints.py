"""Workspace checkpoints and the fenced tool-call records of a durable execution: the SQL.

What a checkpoint is and when one is taken is drawn in :mod:`services.runs.checkpoints`; this
module stores and reads them. A call's record and the checkpoint taken after it go in one
transaction, fenced by the lease epoch (the execution row locked until commit).

Only what a resume can use is kept: storing a checkpoint that holds a patch deletes, in the same
transaction, the earlier checkpoints of the same attempt (lease epoch). A resume reads only the
latest; each attempt keeps its last one (which attempt left the workspace how), and a checkpoint
over the size cap (no patch, a few bytes) deletes nothing, so the attempt's last restorable state
stays beside it.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from services.db.blobs import hydrate
from services.db.evidence import evidence_op, record_tool_call
from services.db.journal import StaleLease
from services.db.models import NodeExecution, ToolCallRecord, WorkspaceCheckpoint
from services.db.session import Database


@dataclass(frozen=True)
class Checkpoint:
    """One snapshot of a workspace's changes against ``base_commit``."""

    base_commit: str
    patch: bytes | None
    size_bytes: int
    sha256: str

    @property
    def available(self) -> bool:
        return self.patch is not None


def add_checkpoint(session: Session, execution_id: str, checkpoint: Checkpoint,
                   call_id: str | None, *, epoch: int | None = None,
                   owner: str | None = None) -> int:
    """Insert ``checkpoint`` as the execution's next one, taken by the attempt ``epoch`` in
    the process ``owner``; answers its sequence number."""
    last = session.execute(select(func.max(WorkspaceCheckpoint.seq))
                           .where(WorkspaceCheckpoint.execution_id == execution_id)
                           ).scalar_one_or_none()
    seq = int(last or 0) + 1
    session.add(WorkspaceCheckpoint(
        execution_id=execution_id, seq=seq, call_id=call_id,
        base_commit=checkpoint.base_commit, available=checkpoint.available,
        size_bytes=checkpoint.size_bytes, sha256=checkpoint.sha256, patch=checkpoint.patch,
        lease_epoch=epoch, owner=owner,
    ))
    if checkpoint.available:
        session.execute(delete(WorkspaceCheckpoint).where(
            WorkspaceCheckpoint.execution_id == execution_id, WorkspaceCheckpoint.seq < seq,
            (WorkspaceCheckpoint.lease_epoch == epoch) if epoch is not None
            else WorkspaceCheckpoint.lease_epoch.is_(None)))
    return seq


def write_call(session: Session, execution_id: str, call_id: str, envelope: dict[str, Any],
               checkpoint: Checkpoint | None, *, epoch: int | None,
               owner: str | None) -> None:
    """A call's (redacted) envelope and the checkpoint taken after it, in ``session`` (the
    caller fences the lease epoch)."""
    record_tool_call(session, execution_id, call_id, envelope=envelope)
    if checkpoint is not None:
        add_checkpoint(session, execution_id, checkpoint, call_id, epoch=epoch, owner=owner)


@dataclass(frozen=True)
class CallWrite:
    """A tool call's record and the checkpoint taken after it, handed to the journal to ride
    along with its next commit (a :class:`~services.db.journal.PendingWrite`)."""

    execution_id: str
    call_id: str
    envelope: dict[str, Any]
    checkpoint: Checkpoint | None
    epoch: int | None
    owner: str | None

    def apply(self, session: Session) -> None:
        write_call(session, self.execution_id, self.call_id, self.envelope, self.checkpoint,
                   epoch=self.epoch, owner=self.owner)

    def as_ops(self, blobs: dict[str, bytes]) -> list[dict[str, Any]]:
        ops = [evidence_op(self.call_id, envelope=self.envelope, blobs=blobs)]
        cp = self.checkpoint
        if cp is not None:
            ops.append({
                "op": "checkpoint", "call_id": self.call_id, "base_commit": cp.base_commit,
                "available": cp.available, "size_bytes": cp.size_bytes, "sha256": cp.sha256,
                "patch": base64.b64encode(cp.patch).decode() if cp.patch is not None else None,
                "epoch": self.epoch, "owner": self.owner})
        return ops


def check_epoch(session: Session, execution_id: str, epoch: int) -> None:
    """Raise :class:`StaleLease` unless ``epoch`` is current (the row locked until commit)."""
    current = session.execute(
        select(NodeExecution.lease_epoch).where(NodeExecution.id == execution_id)
        .with_for_update()).scalar_one_or_none()
    if current != epoch:
        raise StaleLease(f"lease epoch {epoch} is stale (now {current})",
                         details={"execution_id": execution_id})


class CheckpointRepository:
    """An execution's checkpoints, and its tool-call records fenced by the lease epoch."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def latest(self, execution_id: str) -> WorkspaceCheckpoint | None:
        query = (select(WorkspaceCheckpoint)
                 .where(WorkspaceCheckpoint.execution_id == execution_id)
                 .order_by(WorkspaceCheckpoint.seq.desc()).limit(1))
        with self.db.session() as session:
            return session.scalars(query).first()

    def count(self, execution_id: str) -> int:
        with self.db.session() as session:
            return int(session.execute(
                select(func.count()).select_from(WorkspaceCheckpoint)
                .where(WorkspaceCheckpoint.execution_id == execution_id)).scalar_one())

    def envelope(self, execution_id: str, call_id: str) -> dict[str, Any] | None:
        """The recorded envelope of a tool call, or ``None`` when the call has no record."""
        with self.db.read_session() as session:
            envelope = session.execute(
                select(ToolCallRecord.envelope).where(
                    ToolCallRecord.execution_id == execution_id,
                    ToolCallRecord.call_id == call_id)).scalar_one_or_none()
            if envelope is None:
                return None
            (envelope,) = hydrate(session, execution_id, [envelope])
        return dict(envelope)

    def record_call(self, execution_id: str, call_id: str, envelope: dict[str, Any], *,
                    epoch: int, checkpoint: Checkpoint | None, owner: str | None) -> None:
        """Record a call's (redacted) envelope and the checkpoint taken after it, in one
        transaction fenced by ``epoch`` (:class:`StaleLease` when it is no longer current)."""
        with self.db.session() as session:
            check_epoch(session, execution_id, epoch)
            write_call(session, execution_id, call_id, envelope, checkpoint, epoch=epoch,
                       owner=owner)
