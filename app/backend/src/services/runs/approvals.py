"""The durable approval gate, and what resumes an execution once its approvals are decided.

:class:`DbApprovalGate` applies an execution's ``approval_policy``
(:mod:`services.execution.approvals`) with its approvals in the database
(:class:`~services.db.approvals.ApprovalRepository`):

* ``deny``: the call is answered ``permission_denied`` without running; the decision goes on
  the call's record (``tool_calls.approval``) and into the journal (``approval_decided``);
* ``require``: the first time, an approval is recorded (``pending``, expiring after
  ``STUDIO_APPROVAL_TIMEOUT_S``) and the loop pauses (:class:`~services.execution.approvals.
  PauseRun`): the journal gets ``approval_requested``, the execution ``awaiting_approval``, and
  its lease is released (nothing runs, nothing waits). Once decided, the execution is queued and
  dispatched again; the resumed loop finds the decision for the same call: approved, the call
  runs; denied, the model gets ``permission_denied`` with the reason.

:func:`decide_approval` is the one way to decide (API, CLI); a decision after ``expires_at`` is
``approval_expired`` and the approval denied as timed out in the same statement
(:meth:`~services.db.approvals.ApprovalRepository.decide`). :func:`reap_approvals` is the
reaper's part: pending approvals past their time are denied (``decided_by`` ``timeout``:
:func:`expire_approvals`, which the API's clock runs too where no reaper does,
:mod:`services.api.approval_clock`), and an execution left waiting with nothing pending (a
decision that came while it was still pausing) is queued again. A gate that finds its own
approval pending past its time denies it the same way.

A flowchart node's execution (a repository node: durable) waits the same way while its node
stays ``running``; once decided it is resumed through its node (``dispatch_node(run_id,
node_key)``: the node task runs the execution again, records the node's outcome and advances the
run), never as a standalone execution. Each such resume is handed out once
(:func:`~services.db.approvals.claim_node_resumes`); a caller without a node dispatch leaves it
to a reaper that has one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from services.db.approvals import (
    TIMEOUT_DECIDER,
    TIMEOUT_REASON,
    ApprovalRepository,
    Decided,
    claim_node_resumes,
    node_of,
)
from services.db.base import utcnow
from services.db.journal import DbEventSink
from services.db.redaction import Redactor
from services.db.session import Database
from services.execution.approvals import (
    ApprovalGate,
    ApprovalPolicy,
    GateAction,
    GateVerdict,
    call_fingerprint,
    parse_policy,
)
from services.execution.errors import ErrorCode, ExecutionError
from services.execution.messages import ToolCall
from services.execution.ports import AgentEvent, AgentEventKind
from services.settings import StudioSettings

log = logging.getLogger(__name__)

Dispatch = Callable[[str], Any]
NodeDispatch = Callable[[str, str], Any]


class DbApprovalGate(ApprovalGate):
    """An :class:`ApprovalGate` whose approvals are recorded and can make a call wait."""

    def __init__(self, policy: ApprovalPolicy, db: Database, execution_id: str, *,
                 timeout_s: float, redactor: Redactor,
                 can_wait: bool = True) -> None:
        super().__init__(policy)
        self.db = db
        self.redactor = redactor
        self.approvals = ApprovalRepository(db, redactor)
        self.execution_id = execution_id
        self.timeout_s = timeout_s
        # an execution run in place (a workspace, no durable resume) cannot wait: ``require``
        # is then refused like ``deny``
        self.can_wait = can_wait

    def _expire(self, approval_id: str) -> dict[str, Any]:
        """The approval denied as timed out (or as someone decided it meanwhile)."""
        try:
            return decide_approval(self.db, self.execution_id, approval_id, "deny",
                                   by=TIMEOUT_DECIDER, reason=TIMEOUT_REASON, dispatch=None,
                                   redactor=self.redactor).approval
        except ExecutionError:  # decided the other way meanwhile: theirs wins
            return self.approvals.get(self.execution_id, approval_id)

    def review(self, call: ToolCall) -> GateVerdict:
        verdict = super().review(call)
        if verdict.action is GateAction.DENY and verdict.evidence is not None \
                and verdict.evidence.get("decided_by") == "policy":
            evidence = {**verdict.evidence, "decided_at": utcnow().isoformat()}
            self.approvals.record_policy_decision(self.execution_id,
                                                  call.model_dump(mode="json"), evidence)
            return GateVerdict(verdict.action, evidence, verdict.message)
        return verdict

    def require(self, call: ToolCall, key: str) -> GateVerdict:
        if not self.can_wait:
            verdict = super().require(call, key)
            evidence = {**(verdict.evidence or {}), "decided_at": utcnow().isoformat()}
            self.approvals.record_policy_decision(self.execution_id,
                                                  call.model_dump(mode="json"), evidence)
            return GateVerdict(verdict.action, evidence, verdict.message)
        data = call.model_dump(mode="json")
        fingerprint = call_fingerprint(call)
        found = self.approvals.decided_for(self.execution_id, call.call_id, fingerprint)
        if found is None:
            found = self.approvals.request(self.execution_id, data, fingerprint=fingerprint,
                                           rule=key, timeout_s=self.timeout_s)
        if found["status"] == "pending" and _past(found["expires_at"]):
            # the gate notices its own expiry (no reaper needed): denied as timed out, through
            # the same conditional decision a person's or the reaper's goes through
            found = self._expire(str(found["id"]))
        if found["status"] == "pending":
            return GateVerdict(GateAction.PAUSE, {
                "approval_id": found["id"], "rule": key, "policy": "require",
                "expires_at": found["expires_at"]})
        evidence = self.approvals.use(str(found["id"]), data)
        if found["status"] == "approved":
            return GateVerdict(GateAction.RUN, evidence)
        who = "timed out" if found["decided_by"] == TIMEOUT_DECIDER \
            else f"denied by {found['decided_by']}"
        reason = f": {found['reason']}" if found.get("reason") else ""
        return GateVerdict(GateAction.DENY, evidence,
                           f"the call was not approved ({who}){reason}")


def _past(expires_at: str | None) -> bool:
    if not expires_at:
        return False
    moment = datetime.fromisoformat(expires_at)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment <= utcnow()


def approval_gate(db: Database, settings: StudioSettings, execution_id: str,
                  policy: dict[str, str] | None, redactor: Redactor, *,
                  can_wait: bool = True) -> DbApprovalGate | None:
    """The gate of an execution with a policy (validated again: it was recorded validated),
    ``None`` without one."""
    parsed = parse_policy(policy or None)
    if not parsed:
        return None
    return DbApprovalGate(parsed, db, execution_id, timeout_s=settings.approval_timeout_s,
                          redactor=redactor, can_wait=can_wait)


def paused_for_approval(events: list[tuple[str, dict[str, Any]]]) -> bool:
    """Whether the journal's last attempt paused for an approval (an ``approval_requested``
    after its last model turn, and no ``finished``): the resume runs that turn's calls."""
    for kind, _ in reversed(events):
        if kind == AgentEventKind.APPROVAL_REQUESTED.value:
            return True
        if kind in (AgentEventKind.MODEL_RESPONSE.value, AgentEventKind.FINISHED.value):
            return False
    return False


def decide_approval(db: Database, execution_id: str, approval_id: str, decision: str, *,
                    by: str, reason: str | None, dispatch: Dispatch | None,
                    redactor: Redactor,
                    dispatch_node: NodeDispatch | None = None,
                    resend_after_s: float = 0.0, requested_by: str | None = None) -> Decided:
    """Decide one approval: the decision is stored, journalled (``approval_decided``) and, when
    it was the last pending one of a waiting execution, the execution is dispatched again (a
    flowchart node's through ``dispatch_node``).

    A person's decision after the approval's ``expires_at`` is refused (``approval_expired``,
    an :class:`ExecutionError`) once the approval was denied as timed out in its place: that
    denial is journalled and the execution dispatched exactly as the reaper's would be.
    ``requested_by`` (who created the execution) is journalled with ``decided_by``: the audit
    names both identities."""
    decided = ApprovalRepository(db, redactor).decide(execution_id, approval_id, decision,
                                                      by=by, reason=reason)
    if decided.changed:
        approval = decided.approval
        DbEventSink(db, redactor).emit(AgentEvent(
            AgentEventKind.APPROVAL_DECIDED, execution_id, 0, {
                "approval_id": approval["id"], "call_id": approval["call_id"],
                "tool": approval["tool"], "rule": approval["rule"], "policy": "require",
                "decision": "approve" if approval["status"] == "approved" else "deny",
                "decided_by": approval["decided_by"], "requested_by": requested_by,
                "decided_at": approval["decided_at"], "reason": approval["reason"]}))
    sent = False
    if decided.resume:
        log.info("execution %s: every approval decided; dispatching it again", execution_id)
        sent = _send(db, execution_id, dispatch, dispatch_node, resend_after_s)
    if decided.expired and by != TIMEOUT_DECIDER:
        approval = decided.approval
        raise ExecutionError(
            f"approval {approval_id} expired at {approval['expires_at']}: it was denied as "
            "timed out, not decided", code=ErrorCode.APPROVAL_EXPIRED,
            details={"approval_id": approval_id, "expires_at": approval["expires_at"],
                     "status": approval["status"], "decided_by": approval["decided_by"],
                     "resumed": decided.resume, "dispatched": sent})
    return decided


def expire_approvals(db: Database, dispatch: Dispatch | None, *, limit: int = 100,
                     execution_id: str | None = None,
                     dispatch_node: NodeDispatch | None = None,
                     resend_after_s: float = 0.0) -> list[str]:
    """Deny the pending approvals past their time (of one execution with ``execution_id``) as
    timed out, each through :func:`decide_approval`; answers the executions dispatched."""
    dispatched: list[str] = []
    for waiting, approval_id in ApprovalRepository(db).expired(limit=limit,
                                                              execution_id=execution_id):
        log.warning("approval %s of execution %s timed out: denied", approval_id, waiting)
        try:
            # the timeout's own texts and the approval's stored (redacted) fields: nothing new
            # to redact
            decided = decide_approval(db, waiting, approval_id, "deny", by=TIMEOUT_DECIDER,
                                      reason=TIMEOUT_REASON, dispatch=dispatch,
                                      redactor=Redactor(),
                                      dispatch_node=dispatch_node,
                                      resend_after_s=resend_after_s)
        except ExecutionError:  # decided meanwhile by a person: theirs wins
            log.info("approval %s was decided meanwhile", approval_id)
            continue
        if decided.resume:
            dispatched.append(waiting)
    return dispatched


def _send(db: Database, execution_id: str, dispatch: Dispatch | None,
          dispatch_node: NodeDispatch | None, resend_after_s: float) -> bool:
    """Dispatch a resumed execution: a flowchart node's through its node (once), a standalone
    one through ``dispatch``; answers whether it was sent."""
    if node_of(db, execution_id) is None:
        if dispatch is None:
            return False
        dispatch(execution_id)
        return True
    if dispatch_node is None:
        log.info("execution %s runs a flowchart node: left for a reaper to dispatch its node",
                 execution_id)
        return False
    sent = False
    for node in claim_node_resumes(db, resend_after_s, execution_id=execution_id):
        log.info("resuming flowchart run %s node %s (execution %s)", node.run_id,
                 node.node_key, execution_id)
        dispatch_node(node.run_id, node.node_key)
        sent = True
    return sent


def reap_approvals(db: Database, dispatch: Dispatch, *, limit: int = 100,
                   dispatch_node: NodeDispatch | None = None,
                   resend_after_s: float = 300.0) -> list[str]:
    """Deny pending approvals past their time, queue again the executions that wait with
    nothing pending, and (with ``dispatch_node``) dispatch the flowchart nodes whose execution
    a decision queued again and nobody sent since (or over ``resend_after_s`` ago); answers the
    executions dispatched."""
    repository = ApprovalRepository(db)
    dispatched = expire_approvals(db, dispatch, limit=limit, dispatch_node=dispatch_node,
                                  resend_after_s=resend_after_s)
    for execution_id in repository.resumable(limit=limit):
        log.info("execution %s waits with no approval pending; dispatching it", execution_id)
        if _send(db, execution_id, dispatch, dispatch_node, resend_after_s):
            dispatched.append(execution_id)
    if dispatch_node is not None:
        for node in claim_node_resumes(db, resend_after_s, limit=limit):
            log.info("resuming flowchart run %s node %s (execution %s), decided meanwhile",
                     node.run_id, node.node_key, node.execution_id)
            dispatch_node(node.run_id, node.node_key)
            dispatched.append(node.execution_id)
    return dispatched
