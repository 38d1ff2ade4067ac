"""Running one work node of a flowchart run: an agent node or a command node.

Both are node executions (rows of ``node_executions`` linked to the run by ``flowchart_run_id`` and
``node_id``). An agent node is one :class:`~services.runs.service.ExecutionService` run with its
prompt rendered from upstream results (in a clone of its own when it names a ``repo_url``, in the
node's workspace otherwise: the service chooses); a command node is one ``command.run`` through the
command domain (confinement, sandbox, scrubbed environment), recorded as a keyed tool call of its
execution. :class:`NodeOutcome` is what the run service records on the node.
"""

from __future__ import annotations

import shlex
import uuid
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from services.db.executions import ExecutionRepository
from services.db.models import NodeExecution
from services.db.redaction import Redactor
from services.db.runtime_settings import NODE_CUTOVER_OVERRIDE
from services.db.session import Database
from services.execution.agent_profile import primary_model
from services.execution.approvals import parse_policy
from services.execution.envelope import SuccessEnvelope
from services.execution.errors import ExecutionError
from services.flowcharts.graph import (
    AgentConfig,
    CommandConfig,
    NodeSpec,
    NodeState,
    ReviewConfig,
)
from services.flowcharts.templates import render_template
from services.flowcharts.workspace import (
    WorkspaceRefused,
    resolve_node_workspace,
    runs_directory,
)
from services.repos.workspaces import workspace_root
from services.runs.request import ExecutionRequest
from services.runs.retries import waits_for_retry
from services.settings import StudioSettings

# What runs a node (the execution service and its engine, the review's start, the command
# domain and its sandbox) is imported by the method that runs it: the API records and advances
# flowchart runs through this module without loading any of it.


@dataclass(frozen=True)
class NodeOutcome:
    state: NodeState
    result: dict[str, Any] | None = None
    error_code: str | None = None
    error_message: str | None = None


@dataclass(frozen=True)
class NodeJob:
    """Everything a work node needs: where it runs, what it sees, how it is linked."""

    run_id: str
    node: NodeSpec
    node_row_id: str | None
    workspace: str | None  # the run's directory
    context: dict[str, Any]
    # the node's own workspace, resolved and checked once when it starts (see resolve_workspace)
    node_workspace: Path | None = None


class NodeRunner:
    """Creates the node execution of a job and runs it."""

    def __init__(self, db: Database, settings: StudioSettings) -> None:
        self.db = db
        self.settings = settings
        self.redactor = Redactor.from_settings(settings)
        self.executions = ExecutionRepository(db, self.redactor)

    def resolve_workspace(self, job: NodeJob) -> NodeJob:
        """``job`` with its node's workspace resolved and checked, once, as the node starts:
        the run's directory or its ``config.workspace`` subdirectory (agent nodes), a real
        directory strictly inside the run's directory (:mod:`services.flowcharts.workspace`)."""
        if job.node.type == "review" or (
                job.node.type == "agent" and AgentConfig.model_validate(job.node.config).repo_url):
            return job  # a repository node works in a clone of its own
        if job.workspace is None:
            raise WorkspaceRefused("the run has no directory of its own")
        name = (AgentConfig.model_validate(job.node.config).workspace
                if job.node.type == "agent" else None)
        run_dir = Path(job.workspace)
        api_run = run_dir.is_relative_to(runs_directory(self.settings))
        resolved = resolve_node_workspace(
            run_dir, name, workspaces=workspace_root(self.settings) if api_run else None)
        return replace(job, node_workspace=resolved)

    @staticmethod
    def workspace(job: NodeJob) -> Path:
        if job.node_workspace is None:
            raise WorkspaceRefused(f"node {job.node.id!r}: its workspace was not resolved")
        return job.node_workspace

    # -- agent ------------------------------------------------------------------------------

    def agent_request(self, job: NodeJob) -> ExecutionRequest:
        """The request of an agent node (a repository one when the node names a ``repo_url``,
        else in the node's workspace); raises ``TemplateRenderError`` on a bad prompt."""
        config = AgentConfig.model_validate(job.node.config)
        node_config = ({NODE_CUTOVER_OVERRIDE: config.cutover_override}
                       if config.cutover_override is not None else {})
        profile = config.profile()
        return ExecutionRequest(
            provider=config.provider, prompt=render_template(job.node.id, config.prompt,
                                                             job.context),
            repo_url=config.repo_url,
            workspace=self.workspace(job) if config.repo_url is None else None,
            model=config.model or primary_model(profile), base_branch=config.base_branch,
            pull_request=config.pull_request, script=config.replay_script,
            github_repo=config.github_repo, limit_overrides=dict(config.limits),
            node_config=node_config, profile=profile,
            approval_policy=parse_policy(config.approval_policy).as_json(),
            setup=tuple(config.setup), network=config.network,
            network_allowlist=tuple(config.network_allowlist),
        )

    def review_request(self, job: NodeJob) -> ExecutionRequest:
        """The request of a review node (:func:`services.runs.review_start.review_request`)."""
        from services.runs.review_start import review_request

        config = ReviewConfig.model_validate(job.node.config)
        return review_request(self.db, self.settings, config.repo_url, config.pr,
                              head_sha=config.head_sha, provider=config.provider,
                              model=config.model, script=config.replay_script,
                              github_repo=config.github_repo)

    def create_agent_execution(self, job: NodeJob, request: ExecutionRequest) -> str:
        from services.runs.service import ExecutionService

        return ExecutionService(self.db, self.settings).create(
            request, flowchart_run_id=job.run_id, node_id=job.node_row_id)

    def run_agent(self, job: NodeJob, execution_id: str,
                  request: ExecutionRequest) -> NodeOutcome | None:
        """The node's outcome; ``None`` while the kill switch holds its execution back, or while
        it waits for an approval (the node stays running and is dispatched again once the
        switch is released, or the approval decided: :mod:`services.runs.approvals`)."""
        from services.runs.service import ExecutionService

        try:
            ran = ExecutionService(self.db, self.settings).execute(execution_id, request)
        except ExecutionError as exc:  # recorded on the execution by the service already
            return NodeOutcome(NodeState.FAILED, error_code=exc.code.value,
                               error_message=f"node {job.node.id!r}: {exc.message}")
        if ran.state in ("paused", "awaiting_approval"):
            return None
        row = self.executions.get(execution_id)
        assert row is not None
        if waits_for_retry(row):  # dispatched again when due, or by an operator's retry
            return None
        return agent_outcome(job.node.id, row, continue_on_failure=continues(job.node))

    # -- command ----------------------------------------------------------------------------

    def command_args(self, job: NodeJob) -> dict[str, Any]:
        """The ``command.run`` arguments, templates rendered."""
        config = CommandConfig.model_validate(job.node.config)
        args: dict[str, Any] = {"cwd": config.cwd, "timeout_s": config.timeout_s,
                                "env": dict(config.env)}
        if config.argv is not None:
            args["argv"] = [render_template(job.node.id, item, job.context)
                            for item in config.argv]
        else:
            args["command"] = render_template(job.node.id, config.command or "", job.context)
        return args

    def create_command_execution(self, job: NodeJob, args: dict[str, Any]) -> str:
        config = CommandConfig.model_validate(job.node.config)
        text = shlex.join(args["argv"]) if "argv" in args else str(args["command"])
        return self.executions.create(
            provider="command", model="", prompt=text,
            workspace=str(self.workspace(job)), runtime="command",
            limits={"timeout_s": config.timeout_s}, flowchart_run_id=job.run_id,
            node_id=job.node_row_id,
        )

    def run_command(self, job: NodeJob, execution_id: str, args: dict[str, Any]) -> NodeOutcome:
        from services.composition import command_sandbox
        from services.db.idempotency import DbIdempotencyStore
        from services.execution.tool_domains.context import ToolDomainContext
        from services.execution.tool_domains.dispatch import Dispatcher
        from services.execution.tool_domains.registry import default_registry

        config = CommandConfig.model_validate(job.node.config)
        workspace = self.workspace(job)
        self.executions.mark_running(execution_id)
        cancel = _CancelWatch(self.executions, execution_id)
        ctx = ToolDomainContext(
            workspace_root=workspace, execution_id=execution_id, request_id=str(uuid.uuid4()),
            correlation_id=execution_id, sandbox=command_sandbox(self.settings),
            stop_requested=cancel,
        )
        dispatcher = Dispatcher(default_registry(), DbIdempotencyStore(self.db, self.redactor))
        call = dispatcher.normalize(f"node-{job.node.id}", "command_run", args)
        envelope = dispatcher.dispatch(call, ctx)
        if cancel.seen:  # the run was cancelled: the command was killed mid-way
            message = f"node {job.node.id!r}: the run was cancelled while its command ran"
            self.executions.finish(execution_id, status="cancelled", outcome="cancelled",
                                   error_code="cancelled", error_message=message)
            return NodeOutcome(NodeState.CANCELLED, error_code="cancelled",
                               error_message=message)
        if not isinstance(envelope, SuccessEnvelope):
            error = envelope.error
            message = f"node {job.node.id!r}: command refused: {error.message}"
            self.executions.finish(execution_id, status="failed", outcome="error",
                                   error_code=error.code.value, error_message=message)
            return NodeOutcome(NodeState.FAILED, error_code=error.code.value,
                               error_message=message)
        result = dict(envelope.result)
        ok = result.get("exit_code") == 0 and not result.get("timed_out")
        result["status"] = "success" if ok else "failed"
        succeeded = ok or config.continue_on_failure
        failure: str | None = None
        if not ok:
            failure = (f"node {job.node.id!r}: command exited with {result.get('exit_code')}"
                       + (" (timed out)" if result.get("timed_out") else ""))
        self.executions.finish(execution_id, status="succeeded" if ok else "failed",
                               outcome="finished", result=result,
                               error_code=None if ok else "command_failed",
                               error_message=failure)
        if succeeded:
            return NodeOutcome(NodeState.SUCCEEDED, result=result)
        return NodeOutcome(NodeState.FAILED, result=result, error_code="command_failed",
                           error_message=failure)


class _CancelWatch:
    """Whether a command node's execution was asked to cancel (its run was), read from the
    database each time the running command asks."""

    def __init__(self, executions: ExecutionRepository, execution_id: str) -> None:
        self.executions = executions
        self.execution_id = execution_id
        self.seen = False

    def __call__(self) -> bool:
        row = self.executions.get(self.execution_id)
        self.seen = self.seen or (row is not None and row.cancel_requested)
        return self.seen


def continues(node: NodeSpec) -> bool:
    """Whether an agent or review node's failure lets the run go on (``continue_on_failure``)."""
    model = ReviewConfig if node.type == "review" else AgentConfig
    return model.model_validate(node.config).continue_on_failure


def agent_outcome(node_id: str, row: NodeExecution, *, continue_on_failure: bool) -> NodeOutcome:
    """The node's outcome from its finished execution.

    ``succeeded`` follows the execution; with ``continue_on_failure`` an agent that answered
    (outcome ``finished``) with status ``failed`` or ``blocked`` succeeds too, so a decision can
    route on that status.
    """
    result = row.result
    if row.status == "succeeded" or (continue_on_failure and row.outcome == "finished"):
        return NodeOutcome(NodeState.SUCCEEDED, result=result)
    if row.status == "cancelled":
        return NodeOutcome(NodeState.CANCELLED, result=result, error_code="cancelled",
                           error_message=f"node {node_id!r}: execution cancelled")
    summary = (result or {}).get("summary") or row.error_message or row.outcome
    return NodeOutcome(NodeState.FAILED, result=result,
                       error_code=row.error_code or "node_failed",
                       error_message=f"node {node_id!r}: execution {row.status}: {summary}")
