"""``studio executions list|show|logs|cancel|approve|deny|retry|discard``: what ran, with which
settings, its evidence and its journal (``logs --follow`` follows a live run to its end), the
decisions on its gated tool calls, and the dead-letter queue (``list --status dead_lettered``,
``retry`` and ``discard``)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:
    from rich.console import Console

from services.cli.database import open_db

app = typer.Typer(help="Node executions and their evidence.", no_args_is_help=True)


def _console() -> Console:
    from rich.console import Console

    return Console(width=200, soft_wrap=False)


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), default=str)


@app.command("list")
def list_executions(
    limit: int = typer.Option(50, help="How many, most recent first."),
    status: str | None = typer.Option(None, help="Only this status."),
    team: str | None = typer.Option(None, "--team", help="Only this team's."),
    as_json: bool = typer.Option(False, "--json", help="One JSON line on stdout."),
) -> None:
    """The most recent executions, with their full ids."""
    from services.db.executions import ExecutionRepository, execution_to_json
    from services.db.teams import TeamStore, UnknownTeam

    db = open_db()
    try:
        team_id = TeamStore(db).id_of(team) if team is not None else None
        rows = [execution_to_json(r) for r in ExecutionRepository(db).list(
            limit=limit, status=status, team_id=team_id)]
    except UnknownTeam as exc:
        typer.echo(f"studio: {exc}", err=True)
        raise typer.Exit(2) from exc
    finally:
        db.dispose()
    if as_json:
        typer.echo(_compact(rows))
        return
    from rich.table import Table

    table = Table("id", "status", "outcome", "provider", "model", "iterations", "cost_usd",
                  "created_at")
    table.columns[0].no_wrap = True
    for row in rows:
        table.add_row(row["id"], _status_text(row), row["outcome"] or "", row["provider"],
                      row["model"], str(row["iterations"]), f"{row['cost_usd']:.4f}",
                      row["created_at"] or "")
    _console().print(table)


def _status_text(execution: dict[str, Any]) -> str:
    """The status, with the pause when the kill switch holds the execution back, and when a
    retry is due; a dead-lettered execution with its last error's code."""
    if execution.get("paused_reason"):
        return f"{execution['status']} (paused: {execution['paused_reason']})"
    if execution.get("retry_at"):
        return f"{execution['status']} (retry at {execution['retry_at']})"
    if execution["status"] == "dead_lettered" and execution.get("last_error"):
        from rich.markup import escape

        return escape(f"dead_lettered ({execution['last_error'].get('code')})")
    return str(execution["status"])


def _runtime_reason(execution: dict[str, Any]) -> str:
    """Why the execution ran on its runtime: the setting, its value and its level."""
    chosen = (execution.get("settings_snapshot") or {}).get("runtime")
    if not isinstance(chosen, dict):
        return ""
    value = "true" if chosen.get("value") else "false"
    return f"{chosen.get('setting')}={value} ({chosen.get('source')})"


def workspace_disk_text(disk: Any) -> str:
    """The workspace's own disk use when provisioned, as ``show`` prints it; "" if unknown."""
    if not isinstance(disk, dict):
        return ""
    history = ("borrowed from the mirror" if disk.get("borrows_mirror")
               else "held in the workspace")
    return (f"{int(disk.get('own_bytes', 0)) / 1e6:.1f} MB (checkout "
            f"{int(disk.get('checkout_bytes', 0)) / 1e6:.1f} MB), history {history}")


def agent_rows(execution: dict[str, Any]) -> dict[str, str]:
    """The agent's role, prompt, MCP servers and models, the price overrides in force and each
    model fallback, as ``show`` prints them."""
    snapshot = execution.get("settings_snapshot") or {}
    agent = snapshot.get("agent") or {}
    rows = {
        "role": str(agent.get("role") or ""),
        "system_prompt": f"{len(agent.get('system_prompt') or '')} characters",
        "mcp_servers": ", ".join(agent.get("mcp_servers") or []),
        "models": ", ".join(f"{m['provider']}:{m.get('model') or '(default)'}"
                            for m in agent.get("models") or []),
        "price_overrides": _compact(snapshot.get("price_overrides") or {}),
    }
    rows["tokens"] = token_line(execution.get("usage") or {})
    for index, event in enumerate(execution.get("compactions") or [], start=1):
        rows[f"compaction_{index}"] = compaction_line(event)
    for index, event in enumerate(execution.get("model_fallbacks") or [], start=1):
        source, target = event.get("from") or {}, event.get("to") or {}
        reason = event.get("reason") or {}
        rows[f"model_fallback_{index}"] = (
            f"{source.get('provider')}:{source.get('model')} -> {target.get('provider')}:"
            f"{target.get('model')} ({reason.get('code')}: {reason.get('message')})")
    return rows


def token_line(usage: dict[str, Any]) -> str:
    """Input (the cached part and the cache writes in it) and output tokens."""
    return (f"{usage.get('input_tokens', 0)} in ({usage.get('cached_input_tokens', 0)} cached, "
            f"{usage.get('cache_write_input_tokens', 0)} written to the cache) / "
            f"{usage.get('output_tokens', 0)} out")


def compaction_line(event: dict[str, Any]) -> str:
    """One ``compaction`` event: ours (tokens before and after, what was condensed) or Claude
    Code's own."""
    if event.get("source") == "claude_code":
        return (f"by Claude Code ({event.get('trigger')}, {event.get('before_tokens')} tokens "
                "before)")
    summary = f", {event.get('replaced')} messages summarized" if event.get("summary") else ""
    return (f"{event.get('before_tokens')} -> {event.get('after_tokens')} tokens (window "
            f"{event.get('window')}), {len(event.get('elided') or [])} outputs elided{summary}")


def _decision(approval: dict[str, Any] | None) -> str:
    """A call's gate decision in one cell: decision, who, when, why."""
    if not approval:
        return ""
    parts = [str(approval.get("decision")), f"by {approval.get('decided_by') or '-'}"]
    if approval.get("decided_at"):
        parts.append(f"at {approval['decided_at']}")
    if approval.get("reason"):
        parts.append(f"reason: {approval['reason']}")
    return " ".join(parts)


def _show_rich(execution: dict[str, Any], calls: list[dict[str, Any]],
               approvals: list[dict[str, Any]] | None = None) -> None:
    from rich.markup import escape
    from rich.table import Table

    console = _console()
    summary = Table("field", "value", show_header=False)
    for key in ("id", "status", "outcome", "runtime", "provider", "model", "repo_url", "branch",
                "base_commit", "head_sha", "pr_url", "iterations", "cost_usd", "error_code",
                "error_message", "created_at", "started_at", "finished_at", "paused_reason",
                "paused_at", "retry_at"):
        # text from providers and operators: shown as text, never as rich markup
        summary.add_row(key, "" if execution[key] is None else escape(str(execution[key])))
    for key in ("last_error", "attempt_errors", "operator_actions"):
        if execution.get(key):
            summary.add_row(key, escape(_compact(execution[key])))
    summary.add_row("runtime_reason", _runtime_reason(execution))
    summary.add_row("workspace_disk", workspace_disk_text(execution.get("workspace_disk")))
    for key in ("settings_snapshot", "limits", "usage"):
        summary.add_row(key, _compact(execution[key]))
    for key, value in agent_rows(execution).items():
        summary.add_row(key, value)
    console.print(summary)
    calls_table = Table("cycle", "call_id", "tool", "ok", "error_code", "duration_ms",
                        "approval")
    for call in calls:
        ok = "-" if call["ok"] is None else ("yes" if call["ok"] else "no")
        duration = "" if call["duration_ms"] is None else f"{call['duration_ms']:.1f}"
        calls_table.add_row(str(call["cycle"]), call["call_id"],
                            f"{call['domain']}.{call['operation']}", ok,
                            call["error_code"] or "", duration, _decision(call.get("approval")))
    console.print(calls_table)
    if approvals:
        table = Table("approval", "tool", "call_id", "rule", "status", "decided_by",
                      "decided_at", "reason")
        for approval in approvals:
            table.add_row(approval["id"], approval["tool"], approval["call_id"],
                          approval["rule"], approval["status"], approval["decided_by"] or "",
                          approval["decided_at"] or "", approval["reason"] or "")
        console.print(table)


@app.command("show")
def show(
    execution_id: str = typer.Argument(..., metavar="ID"),
    as_json: bool = typer.Option(False, "--json", help="One JSON line on stdout."),
) -> None:
    """One execution: its settings snapshot, each tool call with its outcome, usage and cost."""
    from services.db.approvals import ApprovalRepository
    from services.db.executions import ExecutionRepository, execution_to_json, tool_call_to_json

    db = open_db()
    try:
        repository = ExecutionRepository(db)
        row = repository.get(execution_id)
        calls = [tool_call_to_json(c) for c in repository.tool_calls(execution_id)]
        events = repository.events(execution_id)
        fallbacks = [dict(e.data) for e in events if e.kind == "model_fallback"]
        compactions = [dict(e.data) for e in events if e.kind == "compaction"]
        approvals = ApprovalRepository(db).of_execution(execution_id)
    finally:
        db.dispose()
    if row is None:
        typer.echo(f"studio: no execution {execution_id}", err=True)
        raise typer.Exit(1)
    execution = {**execution_to_json(row), "model_fallbacks": fallbacks,
                 "compactions": compactions}
    if as_json:
        typer.echo(_compact({**execution, "tool_calls": calls, "approvals": approvals}))
    else:
        _show_rich(execution, calls, approvals)


FOLLOW_POLL_S = 0.3


@app.command("logs")
def logs(
    execution_id: str = typer.Argument(..., metavar="ID"),
    follow: bool = typer.Option(False, "--follow", "-f",
                                help="Keep printing until the execution has ended."),
) -> None:
    """The execution's journal as the run page shows it; with --follow, until its end (final
    status, branch, commit, pull request, tokens, cost). Exit 1 when it did not succeed."""
    import time

    from services.cli.journal_text import end_lines, event_lines
    from services.db.executions import ExecutionRepository
    from services.db.journal_reader import read_tail

    db = open_db()
    last = 0
    try:
        repository = ExecutionRepository(db)
        while True:
            tail = read_tail(repository, execution_id, last)
            if tail.missing:
                typer.echo(f"studio: no execution {execution_id}", err=True)
                raise typer.Exit(1)
            for event in tail.events:
                for line in event_lines(event.kind, event.cycle, dict(event.data)):
                    typer.echo(line)
                last = event.seq
            if tail.end is not None:
                for line in end_lines(tail.end):
                    typer.echo(line)
                raise typer.Exit(0 if tail.end["status"] == "succeeded" else 1)
            if not follow:
                return
            time.sleep(FOLLOW_POLL_S)
    finally:
        db.dispose()


@app.command("cancel")
def cancel(execution_id: str = typer.Argument(..., metavar="ID")) -> None:
    """Ask a running execution to stop before its next model or tool call."""
    from services.db.executions import ExecutionRepository, UnknownExecution

    db = open_db()
    try:
        ExecutionRepository(db).request_cancel(execution_id)
    except UnknownExecution as exc:
        typer.echo(f"studio: {exc}", err=True)
        raise typer.Exit(1) from exc
    finally:
        db.dispose()
    typer.echo(_compact({"id": execution_id, "cancel_requested": True}))


def _decide(execution_id: str, approval_id: str, decision: str, reason: str | None) -> None:
    """Record the decision as ``cli:<user>``; dispatch the execution when it can resume (to the
    broker when one is configured; otherwise say how to resume it)."""
    import getpass

    from services.cli.broker import broker_dispatch
    from services.db.approvals import node_of
    from services.db.executions import ExecutionRepository
    from services.db.redaction import Redactor
    from services.execution.errors import ExecutionError
    from services.runs.approvals import decide_approval
    from services.settings import get_settings

    if reason is not None and len(reason) > MAX_REASON:
        typer.echo(f"studio: invalid_arguments: --reason is over {MAX_REASON} characters",
                   err=True)
        raise typer.Exit(2)
    settings = get_settings()
    db = open_db()
    try:
        broker = broker_dispatch(settings, db)
        if ExecutionRepository(db).get(execution_id) is None:
            typer.echo(f"studio: no execution {execution_id}", err=True)
            raise typer.Exit(1)
        decided = decide_approval(
            db, execution_id, approval_id, decision, by=f"cli:{getpass.getuser()}",
            reason=reason, dispatch=broker.execution if broker is not None else None,
            redactor=Redactor.from_settings(settings),
            dispatch_node=broker.node if broker is not None else None)
        node = node_of(db, execution_id)
    except ExecutionError as exc:
        typer.echo(f"studio: {exc}", err=True)  # "code: message"
        if exc.details.get("resumed") and broker is None:  # approval_expired: denied, queued
            _resume_hint(execution_id, node_of(db, execution_id))
        raise typer.Exit(1) from exc
    finally:
        db.dispose()
    typer.echo(_compact({"approval": decided.approval, "changed": decided.changed,
                         "resumed": decided.resume}))
    if decided.resume and broker is None:
        _resume_hint(execution_id, node)


def _resume_hint(execution_id: str, node: tuple[str, str] | None) -> None:
    how = f"studio flowchart-node {node[0]} {node[1]}" if node is not None \
        else f"studio execute {execution_id}"
    typer.echo(f"studio: resume it with: {how}", err=True)


MAX_REASON = 4000
REASON_HELP = "Why (stored with the decision, shown as text)."


@app.command("approve")
def approve(
    execution_id: str = typer.Argument(..., metavar="ID"),
    approval_id: str = typer.Argument(..., metavar="APPROVAL_ID"),
    reason: str | None = typer.Option(None, "--reason", help=REASON_HELP),
) -> None:
    """Approve a pending approval: the gated tool call runs when the execution resumes."""
    _decide(execution_id, approval_id, "approve", reason)


@app.command("deny")
def deny(
    execution_id: str = typer.Argument(..., metavar="ID"),
    approval_id: str = typer.Argument(..., metavar="APPROVAL_ID"),
    reason: str | None = typer.Option(None, "--reason", help=REASON_HELP),
) -> None:
    """Deny a pending approval: the model gets ``permission_denied`` with the reason."""
    _decide(execution_id, approval_id, "deny", reason)


def _dead_letter(execution_id: str, action: str) -> None:
    """``retry`` or ``discard`` a dead-lettered execution as ``cli:<user>``; a retry is
    dispatched (to the broker when one is configured; else the command says how to run it)."""
    import getpass

    from services.cli.broker import broker_dispatch
    from services.db.executions import ExecutionRepository, execution_to_json
    from services.execution.errors import ExecutionError
    from services.runs.retries import discard, redrive
    from services.settings import get_settings

    settings = get_settings()
    hints: list[str] = []
    db = open_db()
    try:
        broker = broker_dispatch(settings, db)
        if ExecutionRepository(db).get(execution_id) is None:
            typer.echo(f"studio: no execution {execution_id}", err=True)
            raise typer.Exit(1)
        actor = f"cli:{getpass.getuser()}"
        node_dispatch = broker.node if broker is not None else None
        if action == "retry":
            dispatch = broker.execution if broker is not None else hints.append
            redrive(db, execution_id, actor, dispatch, node_dispatch)
        else:
            discard(db, execution_id, actor, node_dispatch)
        row = ExecutionRepository(db).get(execution_id)
    except ExecutionError as exc:
        typer.echo(f"studio: {exc}", err=True)  # "code: message"
        raise typer.Exit(1) from exc
    finally:
        db.dispose()
    assert row is not None
    shown = execution_to_json(row)
    typer.echo(_compact({"id": execution_id, "status": shown["status"],
                         "operator_actions": shown["operator_actions"]}))
    if hints:
        _resume_hint(execution_id, None)


@app.command("retry")
def retry(execution_id: str = typer.Argument(..., metavar="ID")) -> None:
    """Re-drive a dead-lettered execution: queued again, it resumes from its checkpoint."""
    _dead_letter(execution_id, "retry")


@app.command("discard")
def discard_execution(execution_id: str = typer.Argument(..., metavar="ID")) -> None:
    """Discard a dead-lettered execution: it ends ``failed`` (``dead_lettered``)."""
    _dead_letter(execution_id, "discard")
