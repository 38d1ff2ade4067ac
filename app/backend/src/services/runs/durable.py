"""The durable execution path: what ``studio execute EXECUTION_ID`` runs, wherever it runs.

Lifecycle of a repository execution (:class:`~services.db.status.ExecutionStatus`)::

    queued -> claimed -> running -> finalizing -> succeeded | failed | cancelled | stalled
              (lease)    (workspace   (commit,
                          provisioned, push, PR)
                          the loop)

:func:`execute_execution` claims the lease (a live lease held elsewhere, or a final status: it
does nothing), keeps it alive with a heartbeat thread, provisions the workspace (a resumed
execution re-clones at its recorded base commit and applies its last checkpoint), rebuilds the
conversation from the journal and runs FrontierAgent on it (recorded tool calls are answered
from their records, interrupted ones repaired), then finalizes (:mod:`services.runs.finalize`).
A journal that already ends with ``finished`` skips the loop and goes straight to finalization,
so a crash between the loop and the pull request is picked up by the retry. Every write is
fenced by the lease epoch; a process that lost its lease stops with ``StaleLease`` and leaves
the execution to the new holder.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from services.db.base import utcnow
from services.db.checkpoints import CheckpointRepository
from services.db.executions import ExecutionRepository
from services.db.journal import DbEventSink, StaleLease
from services.db.leases import LeaseStore
from services.db.models import NodeExecution, WorkspaceCheckpoint
from services.db.pauses import PauseStore, killswitch_engaged
from services.db.redaction import Redactor
from services.db.session import Database, open_database
from services.db.status import FINAL_STATUSES, TEAM_CONCURRENCY, ExecutionStatus
from services.execution.approvals import PauseRun
from services.execution.conversation import rebuild_messages, recorded_usage
from services.execution.errors import ErrorCode, ExecutionError, StudioError
from services.execution.messages import Message, Role, TextPart
from services.execution.outcomes import Outcome, RunResult, UsageTotals
from services.execution.ports import (
    AgentEventKind,
    EventSink,
    GitAuth,
)
from services.execution.providers.profiles import prewarm
from services.execution.review import REVIEW_SCHEMA, ReviewInvalid, repair_prompt
from services.execution.tool_domains.context import ToolDomainContext
from services.execution.tool_domains.git.runner import run_git
from services.repos.urls import validate_repo_url
from services.repos.workspaces import (
    DiskGuard,
    Workspace,
    adopt_workspace,
    cleanup,
    disk_room_check,
    disk_use,
    keep,
    provision_workspace,
    remote_branch_sha,
)
from services.runs.approvals import paused_for_approval
from services.runs.attempt import AttemptScope, is_legacy, refusal
from services.runs.checkpoints import CheckpointingToolStore, apply_checkpoint
from services.runs.claimed_changes import claimed_changes
from services.runs.endings import end_execution
from services.runs.finalize import Finalized, FinalizeRequest, finalize
from services.runs.leases import (
    Heartbeat,
    LapseHandler,
    Lease,
    LeaseControl,
    LeaseGuardedGitAuth,
    LeaseTimings,
    new_owner,
)
from services.runs.loop import LoopInputs, LoopWiring
from services.runs.request import ExecutionRequest, GithubWiring, github_wiring, resolve_token
from services.runs.results import (
    ExecutionOutcome,
    end_fields,
    failed_run,
    recorded_run,
)
from services.runs.review import ReviewPhase
from services.runs.setup_phase import blocked_note, controlled_phases
from services.settings import StudioSettings
from services.telemetry import record, tracing

log = logging.getLogger(__name__)

_T = TypeVar("_T")

FINALIZE_ATTEMPTS = 3
FINALIZE_BACKOFF_S = 1.0

# Called with the execution id when ``studio executions cancel`` asks a run to stop: substrates
# (a local child process, a Kubernetes Job) register here to stop what they launched.
CANCEL_HOOKS: list[Callable[[str], None]] = []


def cancel_execution(db: Database, execution_id: str) -> None:
    """Ask the execution to stop (checked before its next model or tool call), then tell every
    registered substrate hook."""
    ExecutionRepository(db).request_cancel(execution_id)
    for hook in CANCEL_HOOKS:
        hook(execution_id)


def _failed_run(row: NodeExecution, error: StudioError) -> RunResult:
    return failed_run(row.id, row.provider, row.model, error.code, error.message)


def _earlier_attempts(events: list[tuple[str, dict[str, Any]]]) -> tuple[str, ...]:
    """The ``traceparent`` of every earlier attempt's agent span (a resume links to them)."""
    return tuple(str(data["traceparent"]) for kind, data in events
                 if kind == AgentEventKind.STARTED.value and data.get("traceparent"))


def _spent(events: list[tuple[str, dict[str, Any]]]) -> UsageTotals | None:
    """What the earlier attempts used: the per-execution budget spans every attempt."""
    total = recorded_usage(events)
    return UsageTotals.model_validate(total) if total is not None else None


class DurableRun:
    """One attempt at an execution, under a held lease."""

    def __init__(self, db: Database, settings: StudioSettings, lease: Lease,
                 sinks: Sequence[EventSink], keep_workspace: bool) -> None:
        self.db = db
        self.settings = settings
        self.lease = lease
        self.sinks = list(sinks)
        self.keep_workspace = keep_workspace
        self.awaiting = False  # paused for an approval: see _await_approval
        self.id = lease.execution_id
        self.scope = AttemptScope(db, settings, self.id, Redactor.from_settings(settings),
                                  lease.epoch, self.sinks)
        self.author, self.redactor = self.scope.author, self.scope.redactor
        self.executions = ExecutionRepository(db, self.redactor)
        self.provider, self.started = "", time.monotonic()
        # the journal as read in this phase of the attempt (before the loop, after it), and
        # the last checkpoint (read once, when the workspace is provisioned)
        self.events: list[tuple[str, dict[str, Any]]] | None = None
        self.latest: WorkspaceCheckpoint | None = None
        # a review execution's own steps (services.runs.review); None for a code change
        self.review: ReviewPhase | None = None
        self.review_prompt = ""

    def run(self) -> ExecutionOutcome:
        row = self.executions.get(self.id)
        assert row is not None  # the claim proved it exists
        self.provider, self.started = row.provider, time.monotonic()
        if killswitch_engaged(self.db):  # claimed while engaged: back to queued at once
            return self._pause(row.branch)
        PauseStore(self.db).clear(self.id, self.lease.epoch)
        if row.base_commit is not None:
            record.resumed(row.provider)
        request = ExecutionRequest.from_row(row)
        refused = refusal(row.settings_snapshot, request)
        if refused is not None:
            return self._fail(row, refused)
        wiring: GithubWiring | None = None
        ws: Workspace | None = None
        try:
            repo = validate_repo_url(request.repo_url or "", from_api=not request.allow_local)
            wiring = github_wiring(self.db, self.settings, request, repo)
            self.redactor.add(wiring.token)
            if request.review is not None:
                self.review = ReviewPhase(self.db, self.settings, self.id, request.review,
                                          request.repo_url or "", request.github_repo,
                                          wiring.token, resolve_token(self.db, self.settings)[1],
                                          self.redactor)
            prewarm(row.provider)  # the SDK's import overlaps the clone (git, not Python)
            with tracing.span("studio.provision", {"studio.execution_id": self.id,
                                                   "studio.resumed": row.base_commit is not None}):
                ws = self._workspace(row, request, wiring.git_auth)
            return self._attempt(row, request, wiring, ws)
        except StaleLease:
            raise
        except StudioError as error:  # provisioning or finalization failed: the run fails
            log.warning("execution %s failed: %s", self.id, self.redactor.text(str(error)))
            return self._fail(row, error)
        finally:
            if ws is not None:
                self._release_workspace(ws)
            if wiring is not None:
                wiring.close()
            if self.review is not None:
                self.review.close()

    def _release_workspace(self, ws: Workspace) -> None:
        if not self.keep_workspace:
            cleanup(ws)
            return
        try:
            keep(ws)
        except StudioError as error:  # the kept clone still borrows from the mirror
            log.warning("execution %s: the kept workspace still borrows the mirror's objects: %s",
                        self.id, self.redactor.text(error.message))

    def _attempt(self, row: NodeExecution, request: ExecutionRequest, wiring: GithubWiring,
                 ws: Workspace) -> ExecutionOutcome:
        events = self._read_journal()
        self.lease.update(status=ExecutionStatus.RUNNING, base_commit=ws.base_commit,
                          branch=ws.branch, base_branch=ws.base_branch, workspace=str(ws.path),
                          workspace_disk=disk_use(ws).to_json(),
                          started_at=row.started_at or utcnow())
        ctx = self._context(ws, request, wiring)
        if self.review is not None:
            self.review_prompt = self.review.prompt(ws.path, self.author)
        run = recorded_run(self.id, row.provider, row.model, events)
        if run is None:
            # the setup phase, then the loop offline or through the egress proxy
            with controlled_phases(self.settings, request, ws.path, ctx,
                                   self.scope.emit, base_branch=ws.base_branch) as loop_ctx:
                if is_legacy(row.settings_snapshot):
                    run = self._legacy(row, request, ws, loop_ctx, events)
                else:
                    try:
                        run = self._loop(row, request, ws, loop_ctx, events)
                        if self.review is not None and run.outcome is Outcome.FINISHED:
                            run = self._reviewed(row, request, ws, loop_ctx, events, run)
                    except PauseRun as pause:  # a call waits for a person: no lease meanwhile
                        return self._await_approval(pause, ws.branch)
            self.events = None  # the loop wrote more: read again once something needs it
        if run.outcome is Outcome.KILLSWITCH_ENGAGED:
            return self._pause(ws.branch, run)
        if self.review is not None:  # a review posts; it commits, pushes and opens nothing
            if run.outcome is Outcome.FINISHED:
                self.lease.update(status=ExecutionStatus.FINALIZING)
                review, ended = self.review, run
                run = self._retried(lambda: review.conclude(ended, ws.path, self.scope.emit))
            return self._end(run, None, ws.branch)
        finalized = None
        if run.succeeded:
            self.lease.update(status=ExecutionStatus.FINALIZING)
            finalized = self._finalize_with_retries(ws, ctx, run, request)
        return self._end(run, finalized, ws.branch)

    def _finalize_with_retries(self, ws: Workspace, ctx: ToolDomainContext, run: RunResult,
                               request: ExecutionRequest) -> Finalized:
        """Finalization is keyed (no second push, no second PR), so a transient failure (GitHub
        or the git host unavailable) is simply tried again, a few times, with backoff."""
        return self._retried(lambda: self._finalize(ws, ctx, run, request))

    def _retried(self, step: Callable[[], _T]) -> _T:
        """``step`` (a keyed finalization, or posting a review) tried again on a retryable
        failure, a few times, with backoff."""
        for attempt in range(1, FINALIZE_ATTEMPTS + 1):
            try:
                with tracing.span("studio.finalize", {"studio.execution_id": self.id,
                                                      "studio.attempt": attempt}):
                    return step()
            except StudioError as error:
                if not error.retryable or attempt == FINALIZE_ATTEMPTS:
                    raise
                delay = FINALIZE_BACKOFF_S * 2 ** (attempt - 1)
                log.warning("execution %s: finalization attempt %d failed (%s); again in %.0fs",
                            self.id, attempt, self.redactor.text(error.message), delay)
                time.sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover

    # -- workspace ----------------------------------------------------------------------------
    def _workspace(self, row: NodeExecution, request: ExecutionRequest,
                   git_auth: GitAuth | None) -> Workspace:
        resumed = row.base_commit is not None
        # a checkpoint is only ever taken after the base commit is recorded
        latest = self.latest = CheckpointRepository(self.db).latest(self.id) if resumed else None
        if latest is not None and not latest.available:
            old = self._old_workspace(row)
            if old is not None:
                return adopt_workspace(old, self.lease.epoch)
            raise ExecutionError("cannot resume: the last checkpoint was over the size cap and "
                                 "the workspace is gone", code=ErrorCode.SUBSTRATE_ERROR)
        base_branch, base_commit = row.base_branch, row.base_commit if resumed else None
        if self.review is not None:  # the pull request's head
            base_branch, base_commit = self.review.checkout()
        ws = provision_workspace(self.id, request.repo_url or "", base_branch=base_branch,
                                 git_auth=git_auth, settings=self.settings,
                                 slug=request.slug or request.prompt,
                                 allow_local=request.allow_local, base_commit=base_commit,
                                 attempt=self.lease.epoch,
                                 work_branch=request.follow_up_branch)
        if row.branch and ws.branch != row.branch:
            raise ExecutionError(f"the workspace branch {ws.branch!r} is not the recorded "
                                 f"{row.branch!r}", code=ErrorCode.SUBSTRATE_ERROR)
        if latest is not None and latest.patch:
            apply_checkpoint(ws.path, latest.patch, self.author)
            log.info("execution %s resumed from checkpoint %d", self.id, latest.seq)
        return ws

    def _old_workspace(self, row: NodeExecution) -> Workspace | None:
        if not (row.workspace and row.branch and row.base_commit and row.base_branch):
            return None
        path = Path(row.workspace)
        found = run_git(path, ["rev-parse", "--abbrev-ref", "HEAD"], check=False,
                        author=self.author) if path.is_dir() else None
        if found is None or found.text.strip() != row.branch:
            return None
        return Workspace(path, row.base_branch, row.base_commit, row.branch,
                         row.repo_url or "", self.id)

    def _context(self, ws: Workspace, request: ExecutionRequest,
                 wiring: GithubWiring) -> ToolDomainContext:
        return self.scope.tool_context(
            ws.path, branch=ws.branch, default_branch=request.follow_up_base or ws.base_branch,
            allow_workflow_changes=request.allow_workflow_changes,
            git_auth=LeaseGuardedGitAuth(wiring.git_auth, self.lease),
            pull_requests=wiring.pull_requests, disk_check=disk_room_check(ws))

    # -- the loop -----------------------------------------------------------------------------
    def _wiring(self, row: NodeExecution, request: ExecutionRequest, ws: Workspace,
                 events: list[tuple[str, dict[str, Any]]], *, legacy: bool) -> LoopWiring:
        latest = self.latest

        def store(journal: DbEventSink | None) -> CheckpointingToolStore:
            return CheckpointingToolStore(
                self.db, workspace=ws.path, base_commit=ws.base_commit, epoch=self.lease.epoch,
                author=self.author, redactor=self.redactor, owner=self.lease.owner,
                last_sha256=latest.sha256 if latest is not None else None, journal=journal)

        wiring = self.scope.wiring(
            request, row.settings_snapshot["limits"], legacy=legacy, store=store,
            guard=lambda control: DiskGuard(LeaseControl(control, self.lease), ws),
            spent=_spent(events))
        wiring.resume_pending = paused_for_approval(events)
        return wiring

    def _legacy(self, row: NodeExecution, request: ExecutionRequest, ws: Workspace,
                ctx: ToolDomainContext, events: list[tuple[str, dict[str, Any]]]) -> RunResult:
        """The provider's own agent CLI instead of the loop (cutover off); a retry starts the
        CLI afresh on the restored checkpoint."""
        return self.scope.run(LoopInputs(self.id, row.provider, row.model, ws.path, row.prompt),
                              ctx, self._wiring(row, request, ws, events, legacy=True),
                              legacy=True)

    def _loop(self, row: NodeExecution, request: ExecutionRequest, ws: Workspace,
              ctx: ToolDomainContext, events: list[tuple[str, dict[str, Any]]],
              history: list[Message] | None = None) -> RunResult:
        wiring = self._wiring(row, request, ws, events, legacy=False)
        return self.scope.run(LoopInputs(
            self.id, row.provider, row.model, ws.path, self.review_prompt or row.prompt,
            request.script, history or rebuild_messages(events) or None,
            trace_links=_earlier_attempts(events), profile=request.profile,
            events=tuple(events), mcp=self.scope.mcp(request),
            output_schema=REVIEW_SCHEMA if self.review is not None else None),
            ctx, wiring, legacy=False)

    def _reviewed(self, row: NodeExecution, request: ExecutionRequest, ws: Workspace,
                  ctx: ToolDomainContext, events: list[tuple[str, dict[str, Any]]],
                  run: RunResult) -> RunResult:
        """A review execution's answer, validated, after one repair turn if it needs one."""
        assert self.review is not None

        def repair(error: ReviewInvalid) -> RunResult:
            turn = Message(role=Role.USER, parts=[TextPart(text=repair_prompt(error))])
            return self._loop(row, request, ws, ctx, self._read_journal(),
                              [*run.messages, turn])

        return self.review.validated(run, repair, self.scope.emit)

    # -- the end ------------------------------------------------------------------------------
    def _await_approval(self, pause: PauseRun, branch: str | None) -> ExecutionOutcome:
        """The loop paused for approval ``pause.approval_id``: the execution waits, holding no
        lease; a decision dispatches it again. ``awaiting_approval`` is set with the lease's
        release, once this attempt is done (its workspace released): set earlier, a decision
        made meanwhile would queue the execution while this process still holds the lease, the
        new attempt's claim would fail and the execution would sit queued until the reaper's
        ``queued_timeout_s``."""
        self.awaiting = True
        log.info("execution %s waits for approval %s", self.id, pause.approval_id)
        return ExecutionOutcome(self.id, "awaiting_approval",
                                ExecutionStatus.AWAITING_APPROVAL, branch=branch,
                                message=f"waiting for approval {pause.approval_id} of "
                                        f"{pause.call.domain}.{pause.call.operation}")

    def _finalize(self, ws: Workspace, ctx: ToolDomainContext, run: RunResult,
                  request: ExecutionRequest) -> Finalized:
        auth = ctx.git_auth

        def remote_sha(branch: str) -> str | None:
            env = auth.environment(ws.remote_url) if auth is not None else {}
            return remote_branch_sha(ws.remote_url, branch, env)

        events = self._journal()
        finalized = finalize(ctx, run.result, FinalizeRequest(
            execution_id=self.id, prompt=request.prompt, base_branch=ws.base_branch,
            base_commit=ws.base_commit, pull_request=request.pull_request,
            claimed_changes=claimed_changes(run.result, events),
            notes=(request.pr_body_note, blocked_note(events)),
            follow_up=request.follow_up_branch is not None),
            remote_sha=remote_sha, check_lease=self.lease.check, on_step=self._journal_step)
        self.lease.update(head_sha=finalized.head_sha, pr_url=finalized.pr_url,
                          pr_number=finalized.pr_number)
        return finalized

    def _journal_step(self, step: str, data: dict[str, Any]) -> None:
        """One finalization step (commit, push, pull request) and its result, as a journal
        event (and to the live sinks)."""
        self.scope.emit(AgentEventKind.FINALIZE, {"step": step, **data})

    def _read_journal(self) -> list[tuple[str, dict[str, Any]]]:
        """Read the journal (once per phase: before the loop, after it)."""
        self.events = [(e.kind, dict(e.data)) for e in self.executions.events(self.id)]
        return self.events

    def _journal(self) -> list[tuple[str, dict[str, Any]]]:
        """The journal as read in this phase, read now if it was not yet (the finalization, its
        retries and a failure's ending share one read after the loop)."""
        return self.events if self.events is not None else self._read_journal()

    def _fail(self, row: NodeExecution, error: StudioError) -> ExecutionOutcome:
        """The run failed outside its loop (refused, provisioning, finalization): it ends with
        a ``finished`` event unless the loop already wrote one (finalization failed)."""
        failed = _failed_run(row, error)
        ended = recorded_run(self.id, failed.provider, failed.model, self._journal()) is not None
        # an integration error raised as not retryable (a GitHub 4xx, an origin the
        # integration does not serve) gives the same answer next time: no retry
        retry = error.retryable or error.code is not ErrorCode.INTEGRATION_UNAVAILABLE
        return self._end(failed, None, row.branch, None if ended else failed.summary(),
                         retry=retry)

    def _pause(self, branch: str | None, run: RunResult | None = None) -> ExecutionOutcome:
        """The kill switch stopped this attempt before a model or tool call: back to
        ``queued``, marked paused, the lease given up; the journal, the tool-call records and
        the last checkpoint stay for the attempt that resumes it once the switch is released."""
        self.lease.lost.set()  # the lease is given up: nothing more is written under it
        PauseStore(self.db).pause(self.id, self.lease.epoch)
        record.attempt_ended(self.provider, Outcome.KILLSWITCH_ENGAGED.value,
                             ExecutionStatus.QUEUED.value, time.monotonic() - self.started)
        log.info("execution %s paused by the kill switch (queued until it is released)",
                 self.id)
        return ExecutionOutcome(self.id, "paused", ExecutionStatus.QUEUED, run, branch=branch,
                                message="paused by the kill switch: queued until it is released "
                                        "(then a worker's reaper, or `studio execute ID`, "
                                        "resumes it)")

    def _end(self, run: RunResult, finalized: Finalized | None, branch: str | None,
             event: dict[str, Any] | None = None, retry: bool = True) -> ExecutionOutcome:
        """The attempt's end on its row, fenced by its lease; ``event``: the data of the
        ``finished`` event to append first (a run that failed before its loop wrote one);
        ``retry``: whether an infrastructure error may queue it again."""
        fields = end_fields(run, self.redactor)
        raw = (run.error or {}).get("retry_after")
        status = end_execution(
            self.db, self.id, fields, event, epoch=self.lease.epoch, redactor=self.redactor,
            update=lambda values: self.lease.update(**values), retry=retry,
            retry_after=float(raw) if isinstance(raw, int | float) else None)
        record.attempt_ended(self.provider, run.outcome.value, status,
                             time.monotonic() - self.started)
        row = self.executions.get(self.id)
        return ExecutionOutcome(
            self.id, "ran", status, run, branch=branch,
            head_sha=finalized.head_sha if finalized else None,
            pr_url=row.pr_url if row is not None else None,
            message=finalized.note if finalized else "")


def execute_execution(execution_id: str, *, settings: StudioSettings,
                      db: Database | None = None, sinks: Sequence[EventSink] = (),
                      owner: str | None = None, keep_workspace: bool = False,
                      on_lapse: LapseHandler | None = None) -> ExecutionOutcome:
    """Claim, run (or resume) and finalize one recorded execution; see the module docstring.

    ``on_lapse`` is called when the lease could not be renewed in time (see
    :class:`~services.runs.leases.Heartbeat`). Raises ``UnknownExecution`` for an unknown id."""
    own_db = db is None
    database = db or open_database(settings)
    try:
        store = LeaseStore(database)
        timings = LeaseTimings.from_db(database)
        owner = owner or new_owner()
        if killswitch_engaged(database) and PauseStore(database).hold(execution_id):
            return ExecutionOutcome(execution_id, "paused", ExecutionStatus.QUEUED,
                                    message="the kill switch is engaged: the execution stays "
                                            "queued until it is released")
        claimed_at = time.monotonic()
        with tracing.span("studio.lease.claim", {"studio.execution_id": execution_id}) as span:
            epoch = store.claim(execution_id, owner, timings.ttl_s)
            span.set_attribute("studio.lease_epoch", epoch or 0)
        if epoch is None:
            row = ExecutionRepository(database).get(execution_id)
            status = row.status if row is not None else None
            if status in FINAL_STATUSES:
                return ExecutionOutcome(execution_id, "already_finished", status,
                                        message=f"execution already finished ({status})")
            if row is not None and row.paused_reason == TEAM_CONCURRENCY:
                return ExecutionOutcome(execution_id, TEAM_CONCURRENCY, status,
                                        message="its team runs as many executions as its "
                                                "concurrency limit allows: it waits, queued")
            return ExecutionOutcome(execution_id, "already_running", status,
                                    message="execution is already running elsewhere")
        lease = Lease(store, execution_id, owner, epoch, timings, renewed_at=claimed_at)
        durable: DurableRun | None = None
        try:
            with Heartbeat(lease, on_lapse):
                durable = DurableRun(database, settings, lease, sinks, keep_workspace)
                return durable.run()
        except StaleLease:
            log.warning("execution %s: lease epoch %d lost; this process stops", execution_id,
                        epoch)
            return ExecutionOutcome(execution_id, "lease_lost",
                                    message="the lease was taken over; this process stopped")
        finally:
            waits = durable is not None and durable.awaiting
            lease.release(ExecutionStatus.AWAITING_APPROVAL if waits else None, yielded=waits)
    finally:
        if own_db:
            database.dispose()
