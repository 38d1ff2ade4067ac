"""``ApprovalRepository``: the approvals gated tool calls ask for, and their decisions.

Each method is one transaction. An approval is asked once per ``(execution_id, call_id)``
(asking again answers the recorded one); it is decided once (``pending`` to ``approved`` or
``denied``; the same decision again changes nothing, another one is
``approval_already_decided``); a decision that comes after ``expires_at`` is refused by the same
conditional UPDATE that decides: the approval is denied as timed out instead (``decided_by``
``timeout``, as the reaper would have). A decision also writes the call's ``tool_calls.approval``
column and, when no approval of the execution is pending any more, moves an execution that
waits (``awaiting_approval``) back to ``queued`` in the same transaction: exactly one decider
gets ``resume`` and dispatches it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import case, exists, func, null, or_, select, update
from sqlalchemy.orm import Session

from services.db.base import utcnow
from services.db.models import FlowchartRunNode, NodeExecution, ToolApproval, ToolCallRecord
from services.db.redaction import Redactor
from services.db.session import Database, dialect_insert
from services.db.status import ExecutionStatus
from services.execution.errors import ErrorCode, ExecutionError

PENDING, APPROVED, DENIED = "pending", "approved", "denied"
DECISIONS = {"approve": APPROVED, "deny": DENIED}
TIMEOUT_DECIDER = "timeout"
TIMEOUT_REASON = "no decision before the approval timed out"


@dataclass(frozen=True)
class Decided:
    """A decision as stored; ``changed``: this call made it (not a repeat); ``resume``: the
    execution went back to ``queued`` and must be dispatched; ``expired``: see
    :meth:`ApprovalRepository.decide`."""

    approval: dict[str, Any]
    changed: bool
    resume: bool
    # the approval was past ``expires_at``: denied as timed out, not as asked
    expired: bool = False


def approval_to_json(row: ToolApproval) -> dict[str, Any]:
    def when(moment: datetime | None) -> str | None:
        return moment.isoformat() if moment is not None else None

    return {
        "id": row.id, "execution_id": row.execution_id, "call_id": row.call_id,
        "tool_name": row.tool_name, "tool": f"{row.domain}.{row.operation}", "args": row.args,
        "rule": row.rule, "status": row.status, "decided_by": row.decided_by,
        "reason": row.reason, "requested_at": when(row.requested_at),
        "expires_at": when(row.expires_at), "decided_at": when(row.decided_at),
    }


def decision_evidence(row: ToolApproval) -> dict[str, Any]:
    """The decision as the call's record and events carry it."""
    return {"approval_id": row.id, "rule": row.rule, "policy": "require",
            "decision": "approve" if row.status == APPROVED else "deny",
            "decided_by": row.decided_by, "reason": row.reason,
            "decided_at": row.decided_at.isoformat() if row.decided_at else None}


class ApprovalRepository:
    def __init__(self, db: Database, redactor: Redactor | None = None) -> None:
        self._db = db
        self._redactor = redactor or Redactor()

    def request(self, execution_id: str, call: dict[str, Any], *, fingerprint: str, rule: str,
                timeout_s: float) -> dict[str, Any]:
        """Ask for an approval of ``call`` (its JSON form), or answer the one already asked."""
        call_id = str(call["call_id"])
        now = utcnow()
        with self._db.session() as session:
            found = self._for_call(session, execution_id, call_id)
            if found is not None:
                return approval_to_json(found)
            row = ToolApproval(
                execution_id=execution_id, call_id=call_id, tool_name=str(call["tool_name"]),
                domain=str(call["domain"]), operation=str(call["operation"]),
                args=self._redactor.data(dict(call.get("args") or {})),
                fingerprint=fingerprint, rule=rule, status=PENDING, requested_at=now,
                expires_at=now + timedelta(seconds=timeout_s),
                team_id=session.scalar(select(NodeExecution.team_id)
                                       .where(NodeExecution.id == execution_id)))
            session.add(row)
            session.flush()
            _record_on_call(session, row, {"approval_id": row.id, "rule": rule,
                                           "policy": "require", "decision": PENDING})
            return approval_to_json(row)

    def decided_for(self, execution_id: str, call_id: str,
                    fingerprint: str) -> dict[str, Any] | None:
        """The approval of this call: asked for this very call, else a decided one no call has
        used yet for the same tool and arguments (a new session of a self-driving engine)."""
        with self._db.session() as session:
            row = self._for_call(session, execution_id, call_id)
            if row is None:
                row = session.scalars(
                    select(ToolApproval).where(
                        ToolApproval.execution_id == execution_id,
                        ToolApproval.fingerprint == fingerprint,
                        ToolApproval.status != PENDING, ToolApproval.used_by_call.is_(None))
                    .order_by(ToolApproval.requested_at).limit(1)).first()
            return approval_to_json(row) if row is not None else None

    def use(self, approval_id: str, call: dict[str, Any]) -> dict[str, Any]:
        """Record that ``call`` gets the decision of ``approval_id``; answers the evidence."""
        with self._db.session() as session:
            row = session.get(ToolApproval, approval_id)
            if row is None:
                raise _not_found(approval_id)
            if row.used_by_call is None:
                row.used_by_call = str(call["call_id"])
            evidence = decision_evidence(row)
            _record_call_approval(session, row.execution_id, call, evidence)
            return evidence

    def record_policy_decision(self, execution_id: str, call: dict[str, Any],
                               evidence: dict[str, Any]) -> None:
        """The policy's own decision on a call (``deny``), on the call's record."""
        with self._db.session() as session:
            _record_call_approval(session, execution_id, call, evidence)

    def decide(self, execution_id: str, approval_id: str, decision: str, *, by: str,
               reason: str | None) -> Decided:
        """Decide a pending approval (``approve`` or ``deny``); see the module docstring.

        One conditional UPDATE decides it, and checks its expiry in the same statement: past
        ``expires_at`` the approval is denied as timed out (``decided_by`` ``timeout``), whoever
        asked, and the answer says ``expired``; so does the answer to anyone but the timeout
        deciding an approval that timed out before."""
        status = DECISIONS[decision]
        text = self._redactor.text(reason) if reason else None
        now = utcnow()
        fresh = ToolApproval.expires_at > now
        with self._db.session() as session:
            result = session.execute(
                update(ToolApproval)
                .where(ToolApproval.id == approval_id,
                       ToolApproval.execution_id == execution_id,
                       ToolApproval.status == PENDING)
                .values(status=case((fresh, status), else_=DENIED),
                        decided_by=case((fresh, by), else_=TIMEOUT_DECIDER),
                        reason=case((fresh, text if text is not None else null()),
                                    else_=TIMEOUT_REASON),
                        decided_at=now)
                .execution_options(synchronize_session=False))
            row = session.get(ToolApproval, approval_id, populate_existing=True)
            if row is None or row.execution_id != execution_id:
                raise _not_found(approval_id)
            if not result.rowcount:  # type: ignore[attr-defined]
                if row.decided_by == TIMEOUT_DECIDER and by != TIMEOUT_DECIDER:
                    # timed out before (the reaper, the API's clock, the gate): not theirs
                    return Decided(approval_to_json(row), changed=False, resume=False,
                                   expired=True)
                if row.status != status:
                    raise ExecutionError(
                        f"approval {approval_id} was already decided ({row.status})",
                        code=ErrorCode.APPROVAL_ALREADY_DECIDED,
                        details={"approval_id": approval_id, "status": row.status})
                return Decided(approval_to_json(row), changed=False, resume=False)
            expired = row.decided_by == TIMEOUT_DECIDER and _naive(row.expires_at) <= _naive(now)
            _record_on_call(session, row, decision_evidence(row))
            resume = _resume_if_done(session, execution_id)
            return Decided(approval_to_json(row), changed=True, resume=resume, expired=expired)

    @staticmethod
    def _for_call(session: Session, execution_id: str, call_id: str) -> ToolApproval | None:
        return session.scalars(select(ToolApproval).where(
            ToolApproval.execution_id == execution_id,
            ToolApproval.call_id == call_id)).first()

    def get(self, execution_id: str, approval_id: str) -> dict[str, Any]:
        with self._db.read_session() as session:
            row = session.get(ToolApproval, approval_id)
            if row is None or row.execution_id != execution_id:
                raise _not_found(approval_id)
            return approval_to_json(row)

    def of_execution(self, execution_id: str) -> list[dict[str, Any]]:
        with self._db.read_session() as session:
            rows = session.scalars(select(ToolApproval)
                                   .where(ToolApproval.execution_id == execution_id)
                                   .order_by(ToolApproval.requested_at, ToolApproval.id))
            return [approval_to_json(row) for row in rows]

    def expired(self, *, limit: int = 100,
                execution_id: str | None = None) -> list[tuple[str, str]]:
        """``(execution_id, approval_id)`` of pending approvals past their time (of one
        execution with ``execution_id``)."""
        query = (select(ToolApproval.execution_id, ToolApproval.id)
                 .where(ToolApproval.status == PENDING, ToolApproval.expires_at <= utcnow())
                 .order_by(ToolApproval.expires_at).limit(limit))
        if execution_id is not None:
            query = query.where(ToolApproval.execution_id == execution_id)
        with self._db.read_session() as session:
            rows = session.execute(query).all()
        return [(str(e), str(a)) for e, a in rows]

    def next_expiry(self) -> datetime | None:
        """When the first pending approval expires (``None``: none is pending)."""
        with self._db.read_session() as session:
            found = session.scalar(select(func.min(ToolApproval.expires_at))
                                   .where(ToolApproval.status == PENDING))
        return found if isinstance(found, datetime) else None

    def resumable(self, *, limit: int = 100) -> list[str]:
        """Executions that wait (``awaiting_approval``) with nothing pending any more (a
        decision that came while the run was still pausing), or whose cancellation was asked
        (the resumed attempt stops at its first check, ``cancelled``), moved back to
        ``queued``."""
        found: list[str] = []
        with self._db.session() as session:
            candidates = session.execute(
                select(NodeExecution.id, NodeExecution.cancel_requested)
                .where(NodeExecution.status == ExecutionStatus.AWAITING_APPROVAL)
                .limit(limit)).all()
            for execution_id, cancel in candidates:
                if _resume_if_done(session, execution_id, force=bool(cancel)):
                    found.append(execution_id)
        return found


def _not_found(approval_id: str) -> ExecutionError:
    return ExecutionError(f"no approval {approval_id} for this execution",
                          code=ErrorCode.APPROVAL_NOT_FOUND, details={"approval_id": approval_id})


def _resume_if_done(session: Session, execution_id: str, *, force: bool = False) -> bool:
    """``awaiting_approval`` to ``queued`` when no approval of the execution is pending (or
    ``force``)."""
    pending = exists().where(ToolApproval.execution_id == execution_id,
                             ToolApproval.status == PENDING)
    conditions = [NodeExecution.id == execution_id,
                  NodeExecution.status == ExecutionStatus.AWAITING_APPROVAL]
    if not force:
        conditions.append(~pending)
    result = session.execute(
        update(NodeExecution)
        .where(*conditions)
        .values(status=ExecutionStatus.QUEUED, updated_at=utcnow()))
    return bool(result.rowcount)  # type: ignore[attr-defined]


def _record_on_call(session: Session, row: ToolApproval, evidence: dict[str, Any]) -> None:
    call = {"call_id": row.call_id, "tool_name": row.tool_name, "domain": row.domain,
            "operation": row.operation}
    _record_call_approval(session, row.execution_id, call, evidence)


def _record_call_approval(session: Session, execution_id: str, call: dict[str, Any],
                          evidence: dict[str, Any]) -> None:
    """Set ``tool_calls.approval`` (the row is created when the call has none yet; the
    journal's evidence upsert fills in the rest and leaves this column alone)."""
    statement = dialect_insert(session)(ToolCallRecord).values(
        execution_id=execution_id, call_id=str(call["call_id"]),
        tool_name=str(call.get("tool_name", "")), domain=str(call.get("domain", "")),
        operation=str(call.get("operation", "")), approval=evidence, created_at=utcnow())
    session.execute(statement.on_conflict_do_update(
        index_elements=["execution_id", "call_id"], set_={"approval": evidence}))


# -- flowchart nodes ------------------------------------------------------------------------
# A flowchart node's execution is resumed through its node (the node task runs it again, then
# advances the run), never as a standalone execution: these find the node and hand each resume
# out once (a compare-and-set on ``dispatched_at``), whoever asks first (the decider, a reaper).


@dataclass(frozen=True)
class WaitingNode:
    """A flowchart node whose execution was queued again by a decision: to dispatch."""

    execution_id: str
    run_id: str
    node_key: str


def node_of(db: Database, execution_id: str) -> tuple[str, str] | None:
    """``(run_id, node_key)`` of the flowchart node the execution runs, ``None`` for a
    standalone execution."""
    with db.read_session() as session:
        row = session.scalars(select(FlowchartRunNode)
                              .where(FlowchartRunNode.execution_id == execution_id)).first()
        return (row.run_id, row.node_key) if row is not None else None


def waits_for_approval(db: Database, execution_id: str) -> bool:
    """Whether the execution waits for an approval, or was queued again by a decision (its node
    is dispatched again: not an execution whose process died)."""
    with db.read_session() as session:
        row = session.get(NodeExecution, execution_id)
        if row is None:
            return False
        if row.status == ExecutionStatus.AWAITING_APPROVAL:
            return True
        return row.status == ExecutionStatus.QUEUED and bool(session.scalar(
            select(exists().where(ToolApproval.execution_id == execution_id))))


def claim_node_resumes(db: Database, older_than_s: float, *, execution_id: str | None = None,
                       limit: int = 100) -> list[WaitingNode]:
    """Flowchart nodes (still running) whose execution a decision (or a cancellation) queued
    again, not dispatched
    since the last decision nor over ``older_than_s`` ago; each is stamped dispatched (only
    the caller that stamps it gets it). ``execution_id``: only that one."""
    now = utcnow()
    last_decided = (select(func.max(ToolApproval.decided_at))
                    .where(ToolApproval.execution_id == NodeExecution.id)
                    .correlate(NodeExecution).scalar_subquery())
    query = (select(NodeExecution.id, NodeExecution.dispatched_at, last_decided,
                    FlowchartRunNode.run_id, FlowchartRunNode.node_key)
             .join(FlowchartRunNode, FlowchartRunNode.execution_id == NodeExecution.id)
             .where(NodeExecution.status == ExecutionStatus.QUEUED,
                    NodeExecution.lease_owner.is_(None), NodeExecution.paused_reason.is_(None),
                    FlowchartRunNode.state == "running",
                    or_(NodeExecution.cancel_requested.is_(True),
                        exists().where(ToolApproval.execution_id == NodeExecution.id,
                                       ToolApproval.status != PENDING)))
             .limit(limit))
    if execution_id is not None:
        query = query.where(NodeExecution.id == execution_id)
    found: list[WaitingNode] = []
    with db.session() as session:
        for ident, sent, decided, run_id, node_key in session.execute(query).all():
            due = sent is None or (decided is not None and _naive(sent) < _naive(decided)) \
                or _naive(sent) < _naive(now - timedelta(seconds=older_than_s))
            if not due:
                continue
            not_sent = [NodeExecution.dispatched_at.is_(None),
                        NodeExecution.dispatched_at < now - timedelta(seconds=older_than_s)]
            if decided is not None:
                not_sent.append(NodeExecution.dispatched_at < decided)
            stamped = session.execute(
                update(NodeExecution)
                .where(NodeExecution.id == ident, NodeExecution.status == ExecutionStatus.QUEUED,
                       NodeExecution.lease_owner.is_(None), or_(*not_sent))
                .values(dispatched_at=now))
            if stamped.rowcount:  # type: ignore[attr-defined]
                found.append(WaitingNode(str(ident), str(run_id), str(node_key)))
    return found


def _naive(moment: datetime) -> datetime:
    """SQLite answers naive datetimes, PostgreSQL aware ones (UTC either way)."""
    return moment.replace(tzinfo=None)
