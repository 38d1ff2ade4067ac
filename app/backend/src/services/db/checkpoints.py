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

from sqlalchemy import Connection, Table, bindparam, delete, func, insert, select
from sqlalchemy.orm import Session

from services.db.evidence import evidence_op, record_tool_call, recorded_envelope, repeats
from services.db.journal import StaleLease
from services.db.models import NodeExecution, WorkspaceCheckpoint
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


_CHECKPOINTS: Table = WorkspaceCheckpoint.__table__  # type: ignore[assignment]
# Built once (a statement built per call costs its construction and cache key every time).
_LAST_SEQ = select(func.max(_CHECKPOINTS.c.seq)).where(
    _CHECKPOINTS.c.execution_id == bindparam("p_execution_id"))
_INSERT = insert(_CHECKPOINTS)
_DELETE_OLDER = {
    epoch_known: delete(_CHECKPOINTS).where(
        _CHECKPOINTS.c.execution_id == bindparam("p_execution_id"),
        _CHECKPOINTS.c.seq < bindparam("p_seq"),
        (_CHECKPOINTS.c.lease_epoch == bindparam("p_epoch")) if epoch_known
        else _CHECKPOINTS.c.lease_epoch.is_(None))
    for epoch_known in (True, False)
}


def add_checkpoint(session: Session | Connection, execution_id: str, checkpoint: Checkpoint,
                   call_id: str | None, *, epoch: int | None = None,
                   owner: str | None = None) -> int:
    """Insert ``checkpoint`` as the execution's next one, taken by the attempt ``epoch`` in
    the process ``owner``; answers its sequence number (Core statements on the table: no ORM
    unit of work on the journal's commit)."""
    last = session.execute(_LAST_SEQ, {"p_execution_id": execution_id}).scalar_one_or_none()
    seq = int(last or 0) + 1
    session.execute(_INSERT, {
        "execution_id": execution_id, "seq": seq, "call_id": call_id,
        "base_commit": checkpoint.base_commit, "available": checkpoint.available,
        "size_bytes": checkpoint.size_bytes, "sha256": checkpoint.sha256,
        "patch": checkpoint.patch, "lease_epoch": epoch, "owner": owner,
    })
    if checkpoint.available:
        session.execute(_DELETE_OLDER[epoch is not None],
                        {"p_execution_id": execution_id, "p_seq": seq, "p_epoch": epoch})
    return seq


def write_call(session: Session | Connection, execution_id: str, call_id: str,
               envelope: dict[str, Any], checkpoint: Checkpoint | None, *, epoch: int | None,
               owner: str | None, known_blobs: set[str] | None = None) -> None:
    """A call's (redacted) envelope and the checkpoint taken after it, in ``session`` (the
    caller fences the lease epoch)."""
    record_tool_call(session, execution_id, call_id, envelope=envelope,
                     known_blobs=known_blobs)
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

    def apply(self, connection: Connection, known_blobs: set[str] | None = None) -> None:
        write_call(connection, self.execution_id, self.call_id, self.envelope,
                   self.checkpoint, epoch=self.epoch, owner=self.owner,
                   known_blobs=known_blobs)

    def repeats(self, written: dict[tuple[str, str], dict[str, Any]]) -> bool:
        """Whether it writes nothing after the evidence ``written`` earlier in the same
        transaction (by execution and call id: a ``tool_result`` event's, which carries the
        same envelope when the idempotency store records a call the loop ran)."""
        first = written.get((self.execution_id, self.call_id))
        return (self.checkpoint is None and first is not None
                and repeats(first, self.envelope))

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
        return recorded_envelope(self.db, execution_id, call_id)

    def record_call(self, execution_id: str, call_id: str, envelope: dict[str, Any], *,
                    epoch: int, checkpoint: Checkpoint | None, owner: str | None) -> None:
        """Record a call's (redacted) envelope and the checkpoint taken after it, in one
        transaction fenced by ``epoch`` (:class:`StaleLease` when it is no longer current)."""
        with self.db.session() as session:
            check_epoch(session, execution_id, epoch)
            write_call(session, execution_id, call_id, envelope, checkpoint, epoch=epoch,
                       owner=owner)
