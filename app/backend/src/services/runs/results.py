"""How every execution ends, whichever way it ran (in place, or cloned and finalized).

:func:`final_status` maps a loop's result to the row's status; :func:`failed_run` is the result
of a run refused or failed before (or outside) its loop, :func:`cutover_refusal` the refusal
while the agent runtime cutover is off for a provider
without a legacy CLI; :func:`end_fields` are the columns the end writes;
:class:`ExecutionOutcome` is what one execution did, :func:`recorded_run` a finished loop read
back from the journal.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from services.db.redaction import Redactor
from services.db.status import ExecutionStatus
from services.execution.errors import ErrorCode, ExecutionError
from services.execution.messages import AgentResult, AgentStatus
from services.execution.outcomes import Outcome, RunResult, UsageTotals
from services.execution.providers.profiles import legacy_refusal
from services.runs.runtime_choice import runtime_choice

FINAL_STATUS = {
    Outcome.CANCELLED: ExecutionStatus.CANCELLED,
    Outcome.STALLED: ExecutionStatus.STALLED,
}


def final_status(result: RunResult) -> ExecutionStatus:
    """The execution status a run ends in."""
    if result.outcome in FINAL_STATUS:
        return FINAL_STATUS[result.outcome]
    return ExecutionStatus.SUCCEEDED if result.succeeded else ExecutionStatus.FAILED


def failed_run(execution_id: str, provider: str, model: str, code: ErrorCode,
               message: str) -> RunResult:
    """The result of a run that failed with ``code`` before its loop could answer."""
    return RunResult(
        execution_id=execution_id, provider=provider, model=model, outcome=Outcome.ERROR,
        result=AgentResult(status=AgentStatus.FAILED, summary=message), usage=UsageTotals(),
        iterations=0, error={"code": code.value, "message": message},
    )


def cutover_refusal(snapshot: dict[str, Any], provider: str) -> ExecutionError | None:
    """The refusal of an execution recorded while the agent runtime cutover was off for a
    provider without an agent CLI in the legacy runtime, else ``None``."""
    if runtime_choice(snapshot).runtime != "legacy":
        return None
    return legacy_refusal(provider)


def end_fields(run: RunResult, redactor: Redactor) -> dict[str, Any]:
    """The columns the end of ``run`` writes on its row (known secrets replaced)."""
    error = run.error or {}
    return {
        "status": final_status(run), "outcome": run.outcome.value,
        "result": redactor.data(run.result.model_dump(mode="json")),
        "usage": run.usage.model_dump(mode="json"), "cost_usd": run.usage.cost_usd,
        "iterations": run.iterations, "error_code": error.get("code"),
        "error_message": redactor.text(str(error["message"])) if error else None,
    }


@dataclass(frozen=True)
class ExecutionOutcome:
    """What one execution did: ``state`` is ``ran``, ``already_running``, ``already_finished``,
    ``lease_lost`` or ``paused`` (by the kill switch: queued again); ``branch``, ``head_sha``
    and ``pr_url`` for a repository run."""

    execution_id: str
    state: str
    status: str | None = None
    run: RunResult | None = None
    branch: str | None = None
    head_sha: str | None = None
    pr_url: str | None = None
    message: str = ""

    def summary(self) -> dict[str, Any]:
        data: dict[str, Any] = self.run.summary() if self.run is not None else {
            "execution_id": self.execution_id}
        data.update(state=self.state, execution_status=self.status, branch=self.branch,
                    head_sha=self.head_sha, pr_url=self.pr_url)
        if self.message:
            data["message"] = self.message
        return data

    @property
    def succeeded(self) -> bool:
        return self.status == ExecutionStatus.SUCCEEDED


def recorded_run(execution_id: str, provider: str, model: str,
                 events: Sequence[tuple[str, dict[str, Any]]]) -> RunResult | None:
    """The loop's result when the journal's last attempt already ``finished``, else ``None``
    (an attempt the kill switch paused finished nothing: the execution resumes; a loop that
    failed and was queued again, a ``retry`` event after its ``finished``, runs again)."""
    starts = [i for i, (kind, _) in enumerate(events) if kind == "started"]
    tail = events[starts[-1]:] if starts else events
    retried = False
    for kind, data in reversed(tail):
        if kind == "retry":
            retried = True
        if kind == "finished" and data.get("outcome") == Outcome.KILLSWITCH_ENGAGED.value:
            return None
        if kind == "finished" and retried and data.get("outcome") != Outcome.FINISHED.value:
            return None
        if kind == "finished":
            return RunResult(
                execution_id=execution_id, provider=provider, model=model,
                outcome=Outcome(data["outcome"]),
                result=AgentResult.model_validate(data["result"]),
                usage=UsageTotals.model_validate(data.get("usage") or {}),
                iterations=int(data.get("iterations", 0)),
                parsed_result=bool(data.get("parsed_result")), error=data.get("error"))
    return None
