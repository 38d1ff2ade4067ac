"""``studio triggers``: what starts work on GitHub, per repository (``set``, ``list``,
``delete``), and what came of the latest deliveries (``activity``). The webhook secret is set
with ``studio integrations set github --webhook-secret-stdin``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from services.cli.database import open_db
from services.execution.errors import ConfigError
from services.settings import get_settings

app = typer.Typer(help="GitHub triggers: issues and comments that start work.",
                  no_args_is_help=True)


def _fail(message: str) -> None:
    typer.echo(f"studio triggers: {message}", err=True)
    raise typer.Exit(2)


def _limits(pairs: list[str]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            _fail(f"--limit takes KEY=VALUE, not {pair!r}")
        found[key.strip()] = value.strip()
    return found


@app.command("set")
def set_trigger(
    repository: Annotated[str, typer.Argument(help="OWNER/NAME on GitHub.")],
    repo_url: Annotated[str, typer.Option("--repo-url", help="The clone URL.")],
    provider: Annotated[str, typer.Option(help="The provider every triggered run uses.")],
    model: Annotated[str | None, typer.Option(help="Its model (provider default).")] = None,
    label: Annotated[str | None, typer.Option(help="Issue label that starts work.")] = "studio",
    assignee: Annotated[str | None, typer.Option(
        help="Login whose assignment to an issue starts work.")] = None,
    command: Annotated[str, typer.Option(
        "--command", help="What a follow-up comment starts with.")] = "/studio",
    limit: Annotated[list[str] | None, typer.Option(
        "--limit", help="KEY=VALUE per-run limit (repeatable).")] = None,
    script: Annotated[Path | None, typer.Option(help="Replay script (replay only).")] = None,
    enabled: Annotated[bool, typer.Option("--enabled/--disabled")] = True,
    review: Annotated[bool, typer.Option(
        "--review/--no-review",
        help="Review pull requests when opened, pushed to or reopened.")] = False,
) -> None:
    """Store the repository's trigger (comment text never changes these settings)."""
    from pydantic import ValidationError

    from services.triggers import rules

    replay = None
    if script is not None:
        try:
            replay = json.loads(script.read_text())
        except (OSError, ValueError) as exc:
            _fail(f"cannot read the replay script: {exc}")
    db = open_db()
    try:
        config = rules.TriggerConfig(repo_url=repo_url, provider=provider, model=model,
                                     label=label or None, assignee=assignee, command=command,
                                     limits=_limits(limit or []), replay_script=replay,
                                     enabled=enabled, review=review)
        row = rules.put(db, get_settings(), repository, config)
        typer.echo(json.dumps(rules.described(row), separators=(",", ":")))
    except ValidationError as exc:
        _fail("; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()))
    except ConfigError as exc:
        _fail(f"{exc.code}: {exc.message}")
    finally:
        db.dispose()


@app.command("list")
def list_triggers() -> None:
    """One JSON line per trigger."""
    from services.db.triggers import TriggerStore
    from services.triggers.rules import described

    db = open_db()
    try:
        for row in TriggerStore(db).all():
            typer.echo(json.dumps(described(row), separators=(",", ":")))
    finally:
        db.dispose()


@app.command("delete")
def delete_trigger(repository: Annotated[str, typer.Argument(help="OWNER/NAME.")]) -> None:
    from services.db.triggers import TriggerStore

    db = open_db()
    try:
        if not TriggerStore(db).delete(repository):
            _fail(f"no trigger for {repository}")
    finally:
        db.dispose()


@app.command("activity")
def activity(limit: Annotated[int, typer.Option(min=1, max=500)] = 20) -> None:
    """The latest deliveries (one JSON line each, newest first) and the busy slots."""
    from services.db.triggers import DEBOUNCING, RUNNING, DeliveryStore, SlotStore

    db = open_db()
    try:
        for d in DeliveryStore(db).recent(limit):
            typer.echo(json.dumps({"delivery": d.id, "event": d.event, "action": d.action,
                                   "repository": d.repository, "number": d.number,
                                   "sender": d.sender, "outcome": d.outcome,
                                   "execution_id": d.execution_id,
                                   "received_at": d.received_at.isoformat()},
                                  separators=(",", ":")))
        for s in SlotStore(db).in_states(RUNNING, DEBOUNCING):
            typer.echo(json.dumps({"slot": f"{s.repository}#{s.number}", "state": s.state,
                                   "execution_id": s.execution_id}, separators=(",", ":")))
    finally:
        db.dispose()
