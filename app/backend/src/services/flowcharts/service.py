"""The flowchart run service: start a run, advance it as nodes finish, cancel it.

A run keeps a snapshot of the flowchart's graph and one state row per node (``pending``,
``running``, ``succeeded``, ``failed``, ``skipped``, ``cancelled``). :meth:`advance` is the
traversal (:func:`services.flowcharts.traversal.plan`) under a lock on the run row: control nodes
(start, decision, end) are evaluated inline, nodes that can no longer run are skipped, and each
ready work node (agent, command) is marked running and dispatched as one task,
``studio.run_flowchart_node(run_id, node_id)``; :meth:`run_node` is that task's body.

A node that fails fails the run: pending nodes are cancelled and running node executions are
asked to stop. The guard ``max_node_executions`` (default: the ``flowchart_max_node_executions``
setting) fails the run before it would start one node execution too many. :meth:`cancel` marks
the run cancelled and requests cancel of every running node execution.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from services.db.approvals import waits_for_approval
from services.db.base import utcnow
from services.db.executions import ExecutionRepository
from services.db.flowcharts import (
    FlowchartRepository,
    UnknownFlowchartRun,
    awaiting_approval,
    locked_run,
    recent_runs,
    run_nodes,
    run_to_json,
)
from services.db.mcp_servers import McpServerRepository
from services.db.models import FlowchartRun, FlowchartRunNode
from services.db.pauses import PauseStore, killswitch_engaged
from services.db.redaction import Redactor
from services.db.session import Database, Session
from services.db.status import FINAL_STATUSES, ExecutionStatus
from services.execution.errors import ErrorCode, StudioError
from services.flowcharts.graph import (
    FINISHED_STATES,
    WORK_TYPES,
    FlowchartGraph,
    NodeState,
    check_mcp_servers,
    validate_graph,
)
from services.flowcharts.nodes import NodeJob, NodeOutcome, NodeRunner, agent_outcome, continues
from services.flowcharts.templates import TemplateRenderError, template_context
from services.flowcharts.traversal import decide, plan
from services.flowcharts.workspace import create_run_directory
from services.runs.retries import waits_for_retry
from services.settings import StudioSettings

log = logging.getLogger(__name__)

NodeDispatch = Callable[[str, str], None]
RUN_FINAL = frozenset({"succeeded", "failed", "cancelled"})


class FlowchartRunService:
    """Runs of flowcharts against one database.

    ``dispatch(run_id, node_id)`` hands a ready work node to a worker; by default the node runs
    in this process (what Celery does without a broker).
    """

    def __init__(self, db: Database, settings: StudioSettings,
                 dispatch: NodeDispatch | None = None) -> None:
        self.db = db
        self.settings = settings
        self.dispatch: NodeDispatch = dispatch or self.run_node
        self.flowcharts = FlowchartRepository(db)
        self.executions = ExecutionRepository(db, Redactor.from_settings(settings))

    # -- public -----------------------------------------------------------------------------

    def start(self, flowchart_id: str, *, inputs: dict[str, Any] | None = None,
              workspace: str | None = None, max_node_executions: int | None = None,
              created_by: tuple[str | None, str | None] = (None, None)) -> str:
        """Record a run of the flowchart's current graph and dispatch its first nodes.

        The run gets a directory of its own under the workspace root
        (:func:`~services.flowcharts.workspace.create_run_directory`). ``workspace`` (a local
        directory instead) is for local, trusted callers only; the HTTP API never passes one.
        """
        stored = self.flowcharts.get(flowchart_id)
        graph = FlowchartGraph.model_validate(stored.graph)
        validate_graph(graph)
        check_mcp_servers(graph, McpServerRepository(self.db, self.settings).names())
        limit = max_node_executions or self.settings.flowchart_max_node_executions
        with self.db.session() as session:
            run = FlowchartRun(flowchart_id=flowchart_id, status="running", inputs=inputs or {},
                               graph=graph.model_dump(mode="json", by_alias=True),
                               workspace=workspace, max_node_executions=limit,
                               started_at=utcnow(), team_id=stored.team_id,
                               created_by_token=created_by[0], created_by=created_by[1])
            session.add(run)
            session.flush()
            if workspace is None:
                run.workspace = str(create_run_directory(self.settings, run.id))
            for node in graph.nodes:
                session.add(FlowchartRunNode(run_id=run.id, node_key=node.id, type=node.type,
                                             state=NodeState.PENDING.value))
            run_id = run.id
        self.advance(run_id)
        return run_id

    def get(self, run_id: str) -> dict[str, Any]:
        with self.db.session() as session:
            run = session.get(FlowchartRun, run_id)
            if run is None:
                raise UnknownFlowchartRun(run_id)
            nodes = run_nodes(session, run_id)
            return run_to_json(run, nodes, awaiting_approval(session, nodes))

    def list_runs(self, *, flowchart_id: str | None = None, limit: int = 50,
                  team_id: str | None = None) -> list[dict[str, Any]]:
        with self.db.session() as session:
            return [run_to_json(run, nodes, awaiting_approval(session, nodes))
                    for run in recent_runs(session, flowchart_id=flowchart_id, limit=limit,
                                           team_id=team_id)
                    for nodes in [run_nodes(session, run.id)]]

    def cancel(self, run_id: str) -> dict[str, Any]:
        """Cancel the run (no-op once it ended) and every running node execution."""
        with self.db.session() as session:
            run = locked_run(session, run_id)
            to_cancel = []
            if run.status not in RUN_FINAL:
                to_cancel = _end_run(session, run, "cancelled", "cancelled",
                                     "the run was cancelled")
        self._request_cancel(to_cancel)
        return self.get(run_id)

    def advance(self, run_id: str) -> None:
        """Evaluate what can happen now and dispatch the ready work nodes."""
        with self.db.session() as session:
            ready, to_cancel = self._advance(session, run_id)
        self._request_cancel(to_cancel)
        for node_id in ready:
            self.dispatch(run_id, node_id)

    def run_node(self, run_id: str, node_id: str) -> None:
        """The body of ``studio.run_flowchart_node``: run one work node, then advance the run."""
        job, execution_id = self._job(run_id, node_id)
        if job is None:
            self._drop_held(run_id, node_id)
            return
        try:
            outcome = self._run_work(job, execution_id)
            if outcome is None:  # held back by the kill switch, or waiting for an approval:
                return  # dispatched again on release, or once decided
        except TemplateRenderError as exc:
            outcome = NodeOutcome(NodeState.FAILED, error_code=ErrorCode.TEMPLATE_ERROR.value,
                                  error_message=str(exc))
        except ValueError as exc:  # a node's limits that do not validate, say
            outcome = NodeOutcome(NodeState.FAILED, error_code=ErrorCode.INVALID_ARGUMENTS.value,
                                  error_message=f"node {node_id!r}: {exc}")
        except StudioError as exc:  # the node's workspace was refused, say
            outcome = NodeOutcome(NodeState.FAILED, error_code=exc.code.value,
                                  error_message=f"node {node_id!r}: {exc.message}")
        except Exception as exc:  # a bug: recorded on the node and logged, the run still ends
            log.exception("flowchart run %s: node %s failed unexpectedly", run_id, node_id)
            outcome = NodeOutcome(NodeState.FAILED, error_code=ErrorCode.INTERNAL_ERROR.value,
                                  error_message=f"node {node_id!r}: internal error: "
                                                f"{type(exc).__name__}")
        self._complete(run_id, node_id, outcome)

    def fail_unfinished(self, run_id: str, node_id: str, message: str) -> None:
        """Fail a node whose runner ended without recording its outcome (no-op otherwise), and
        its execution with it: the run always ends."""
        with self.db.session() as session:
            row = session.get(FlowchartRunNode, (run_id, node_id))
            if row is None or row.state != NodeState.RUNNING.value:
                return
            execution_id = row.execution_id
        message = f"node {node_id!r}: {message}"
        execution = self.executions.get(execution_id) if execution_id else None
        if execution is not None and execution.status == "queued" and execution.paused_reason:
            return  # held back by the kill switch: the node runs again on release
        if execution is not None and waits_for_approval(self.db, execution.id):
            return  # waiting for an approval, or decided: the node runs again through its task
        if execution is not None and waits_for_retry(execution):
            return  # waiting for a retry or an operator: the node runs again through its task
        if execution is not None and execution.status not in FINAL_STATUSES:
            self.executions.finish(execution.id, status="failed", outcome="error",
                                   error_code=ErrorCode.SUBSTRATE_ERROR.value,
                                   error_message=message)
        self._complete(run_id, node_id, NodeOutcome(
            NodeState.FAILED, error_code=ErrorCode.SUBSTRATE_ERROR.value, error_message=message))

    # -- traversal --------------------------------------------------------------------------

    def _advance(self, session: Session, run_id: str) -> tuple[list[str], list[str]]:
        run = locked_run(session, run_id)
        if run.status != "running":
            return [], []
        graph = FlowchartGraph.model_validate(run.graph)
        rows = {row.node_key: row for row in run_nodes(session, run_id)}
        dispatched: list[str] = []
        while True:
            states = {key: NodeState(row.state) for key, row in rows.items()}
            step = plan(graph, states, _results(rows))
            if not step.ready and not step.skipped:
                break
            for key in step.skipped:
                _finish_row(rows[key], NodeState.SKIPPED)
            for key in step.ready:
                failure = self._start_node(graph, run, rows, key)
                if failure is not None:
                    return [], _end_run(session, run, "failed", *failure)
                if rows[key].state == NodeState.RUNNING.value:
                    dispatched.append(key)
        if all(NodeState(row.state) in FINISHED_STATES for row in rows.values()):
            run.status, run.finished_at = "succeeded", utcnow()
        return dispatched, []

    def _start_node(self, graph: FlowchartGraph, run: FlowchartRun,
                    rows: dict[str, FlowchartRunNode], key: str) -> tuple[str, str] | None:
        """Run a control node inline or claim a work node; ``(code, message)`` on failure."""
        node, row = graph.node(key), rows[key]
        row.started_at = utcnow()
        if node.type in WORK_TYPES:
            started = sum(1 for r in rows.values() if r.type in WORK_TYPES and r.started_at)
            limit = run.max_node_executions or self.settings.flowchart_max_node_executions
            if started > limit:
                row.started_at = None
                return ("node_execution_limit",
                        f"the run reached its limit of {limit} node executions; node {key!r} "
                        "was not started")
            row.state = NodeState.RUNNING.value
            return None
        if node.type == "decision":
            try:
                row.result = decide(graph, key, _results(rows))
            except ValueError as exc:
                _finish_row(row, NodeState.FAILED, "decision_failed", str(exc))
                return "decision_failed", str(exc)
        else:
            row.result = {}
        _finish_row(row, NodeState.SUCCEEDED)
        return None

    def _complete(self, run_id: str, node_id: str, outcome: NodeOutcome) -> None:
        to_cancel: list[str] = []
        with self.db.session() as session:
            run = locked_run(session, run_id)
            row = session.get(FlowchartRunNode, (run_id, node_id))
            assert row is not None
            _finish_row(row, outcome.state, outcome.error_code, outcome.error_message)
            row.result = outcome.result
            if run.status == "running" and outcome.state is NodeState.FAILED:
                to_cancel = _end_run(session, run, "failed", outcome.error_code or "node_failed",
                                     outcome.error_message or f"node {node_id!r} failed")
            elif run.status == "running" and outcome.state is NodeState.CANCELLED:
                to_cancel = _end_run(session, run, "cancelled", "cancelled",
                                     f"node {node_id!r} was cancelled")
        self._request_cancel(to_cancel)
        self.advance(run_id)

    # -- work nodes -------------------------------------------------------------------------

    def _job(self, run_id: str, node_id: str) -> tuple[NodeJob | None, str | None]:
        """The job of a node that is to run now; ``None`` (and the node cancelled) otherwise."""
        with self.db.session() as session:
            run = locked_run(session, run_id)
            row = session.get(FlowchartRunNode, (run_id, node_id))
            if row is None or row.state != NodeState.RUNNING.value:
                return None, None
            if run.status != "running":
                _finish_row(row, NodeState.CANCELLED, "cancelled", "the run ended first")
                return None, None
            graph = FlowchartGraph.model_validate(run.graph)
            rows = {r.node_key: r for r in run_nodes(session, run_id)}
            context = template_context(_results(rows), dict(run.inputs))
            flowchart_id, workspace, execution_id = run.flowchart_id, run.workspace, \
                row.execution_id
        row_ids = self.flowcharts.node_row_ids(flowchart_id)
        return NodeJob(run_id=run_id, node=graph.node(node_id), node_row_id=row_ids.get(node_id),
                       workspace=workspace, context=context), execution_id

    def _attach(self, run_id: str, node_id: str, execution_id: str) -> bool:
        """Link the node to its execution; answers whether the run still runs."""
        with self.db.session() as session:
            run = locked_run(session, run_id)
            row = session.get(FlowchartRunNode, (run_id, node_id))
            assert row is not None
            row.execution_id = execution_id
            return run.status == "running"

    def _run_work(self, job: NodeJob, execution_id: str | None) -> NodeOutcome | None:
        runner = NodeRunner(self.db, self.settings)
        job = runner.resolve_workspace(job)
        if job.node.type in ("agent", "review"):
            request = (runner.agent_request(job) if job.node.type == "agent"
                       else runner.review_request(job))
            if execution_id is None:
                execution_id = runner.create_agent_execution(job, request)
                if not self._attach(job.run_id, job.node.id, execution_id):
                    return self._cancelled_before_start(job, execution_id)
            row = self.executions.get(execution_id)
            if row is not None and row.status in FINAL_STATUSES:  # a redelivered task
                return agent_outcome(job.node.id, row, continue_on_failure=continues(job.node))
            if row is not None and row.status == ExecutionStatus.AWAITING_APPROVAL:
                return None  # a task delivered again while the node waits: it keeps waiting
            if row is not None and row.status == ExecutionStatus.DEAD_LETTERED:
                return None  # the node waits for an operator's retry or discard
            if self._held(execution_id):
                return None
            return runner.run_agent(job, execution_id, request)
        args = runner.command_args(job)
        if execution_id is None:
            execution_id = runner.create_command_execution(job, args)
            if not self._attach(job.run_id, job.node.id, execution_id):
                return self._cancelled_before_start(job, execution_id)
        if self._held(execution_id):
            return None
        return runner.run_command(job, execution_id, args)

    def _drop_held(self, run_id: str, node_id: str) -> None:
        """The node will not run (its run ended while the kill switch held it, or while it
        waited for an approval): its queued execution is cancelled, or nothing would end it."""
        with self.db.session() as session:
            row = session.get(FlowchartRunNode, (run_id, node_id))
            execution_id = row.execution_id if row is not None else None
        execution = self.executions.get(execution_id) if execution_id else None
        if execution is not None and execution.status == "queued" and execution.paused_reason:
            self.executions.finish(execution.id, status="cancelled", outcome="cancelled",
                                   error_code="cancelled",
                                   error_message=f"node {node_id!r}: the run ended while the "
                                                 "kill switch held the node")
        elif execution is not None and (waits_for_approval(self.db, execution.id)
                                        or waits_for_retry(execution)):
            self.executions.finish(execution.id, status="cancelled", outcome="cancelled",
                                   error_code="cancelled",
                                   error_message=f"node {node_id!r}: the run ended while the "
                                                 "node waited for an approval")

    def _held(self, execution_id: str) -> bool:
        """While the kill switch is engaged a node's queued execution does not start: it is
        marked paused and stays queued (the reaper dispatches the node again on release)."""
        return killswitch_engaged(self.db) and PauseStore(self.db).hold(execution_id)

    def _cancelled_before_start(self, job: NodeJob, execution_id: str) -> NodeOutcome:
        message = f"node {job.node.id!r}: the run ended before the node started"
        self.executions.finish(execution_id, status="cancelled", outcome="cancelled",
                               error_code="cancelled", error_message=message)
        return NodeOutcome(NodeState.CANCELLED, error_code="cancelled", error_message=message)

    def _request_cancel(self, execution_ids: list[str]) -> None:
        for execution_id in execution_ids:
            self.executions.request_cancel(execution_id)


def _results(rows: dict[str, FlowchartRunNode]) -> dict[str, dict[str, Any]]:
    return {key: dict(row.result or {}) for key, row in rows.items()
            if row.state == NodeState.SUCCEEDED.value}


def _finish_row(row: FlowchartRunNode, state: NodeState, code: str | None = None,
                message: str | None = None) -> None:
    row.state, row.error_code, row.error_message = state.value, code, message
    row.finished_at = utcnow()


def _end_run(session: Session, run: FlowchartRun, status: str, code: str,
             message: str) -> list[str]:
    """End the run; pending nodes are cancelled; answers the running executions to stop."""
    run.status, run.error_code, run.error_message = status, code, message
    run.finished_at = utcnow()
    to_cancel = []
    for row in run_nodes(session, run.id):
        if row.state == NodeState.PENDING.value:
            _finish_row(row, NodeState.CANCELLED, "cancelled", f"the run {status}")
        elif row.state == NodeState.RUNNING.value and row.execution_id:
            to_cancel.append(row.execution_id)
        elif row.state == NodeState.RUNNING.value:  # claimed, no execution yet: it never starts
            _finish_row(row, NodeState.CANCELLED, "cancelled", f"the run {status} first")
    return to_cancel
