"""``studio teams ...``: teams, their repositories, budgets and month (the local database, as an
operator: deployment-wide).

``create NAME [--budget USD] [--notify-url URL]``, ``set NAME [--budget USD | --no-budget]
[--notify-url URL]``, ``delete NAME`` (a team that owns nothing), ``list [--json]``,
``assign PATTERN --team NAME`` / ``unassign PATTERN`` (repositories by ``owner/name`` pattern),
``spend [--json]`` (each team's month: spend, budget, percent, alerts).
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

from services.cli.database import open_db

app = typer.Typer(help="Teams: budgets, repositories, the month's spend.", no_args_is_help=True)

Budget = Annotated[float | None, typer.Option("--budget", help="Monthly budget in USD.")]
NotifyUrl = Annotated[str | None, typer.Option(
    "--notify-url", help="Where budget alerts are POSTed (signed); '' for none.")]


def _fail(message: str) -> typer.Exit:
    typer.echo(f"studio: {message}", err=True)
    return typer.Exit(2)


@app.command("create")
def create(name: str, budget: Budget = None, notify_url: NotifyUrl = None) -> None:
    """Create a team."""
    from services.db.teams import InvalidTeam, TeamStore

    db = open_db()
    try:
        team = TeamStore(db).create(name, monthly_budget_usd=budget, notify_url=notify_url)
    except InvalidTeam as exc:
        raise _fail(str(exc)) from exc
    finally:
        db.dispose()
    typer.echo(f"created team {team.name} ({team.id})")


@app.command("set")
def set_team(name: str, budget: Budget = None,
             no_budget: Annotated[bool, typer.Option("--no-budget",
                                                     help="Remove the team's cap.")] = False,
             notify_url: NotifyUrl = None) -> None:
    """Change a team's monthly budget and/or notification URL."""
    from services.db.teams import InvalidTeam, TeamStore, UnknownTeam

    db = open_db()
    try:
        changed = TeamStore(db).update(
            name, monthly_budget_usd=None if no_budget else (budget if budget is not None
                                                              else "keep"),
            notify_url=notify_url if notify_url is not None else "keep")
    except (InvalidTeam, UnknownTeam) as exc:
        raise _fail(str(exc)) from exc
    finally:
        db.dispose()
    typer.echo(json.dumps(changed.to_json()))


@app.command("delete")
def delete(name: str) -> None:
    """Delete a team that owns no execution, flowchart, token or MCP server."""
    from services.db.teams import InvalidTeam, TeamStore, UnknownTeam

    db = open_db()
    try:
        TeamStore(db).delete(name)
    except (InvalidTeam, UnknownTeam) as exc:
        raise _fail(str(exc)) from exc
    finally:
        db.dispose()
    typer.echo(f"deleted team {name}")


@app.command("list")
def list_teams(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Every team with its budget, notification URL and repository patterns."""
    from services.db.teams import TeamStore

    db = open_db()
    try:
        teams = [team.to_json() for team in TeamStore(db).list()]
    finally:
        db.dispose()
    if as_json:
        typer.echo(json.dumps(teams))
        return
    for team in teams:
        budget = "-" if team["monthly_budget_usd"] is None else f"${team['monthly_budget_usd']}"
        typer.echo(f"{team['name']}\t{budget}\t{', '.join(team['repositories']) or '-'}")


@app.command("assign")
def assign(pattern: str, team: Annotated[str, typer.Option("--team")]) -> None:
    """Assign the repositories matching ``owner/name`` PATTERN (``*``, ``?``) to a team."""
    from services.db.teams import InvalidTeam, TeamStore, UnknownTeam

    db = open_db()
    try:
        TeamStore(db).assign(pattern, team)
    except (InvalidTeam, UnknownTeam) as exc:
        raise _fail(str(exc)) from exc
    finally:
        db.dispose()
    typer.echo(f"{pattern} -> {team}")


@app.command("unassign")
def unassign(pattern: str) -> None:
    """Remove a repository pattern."""
    from services.db.teams import TeamStore

    db = open_db()
    try:
        found = TeamStore(db).unassign(pattern)
    finally:
        db.dispose()
    if not found:
        raise _fail(f"no pattern {pattern!r}")
    typer.echo(f"removed {pattern}")


@app.command("spend")
def spend(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Each team's month: spend (with overflow), budget, percent, the alerts sent."""
    from services.db.team_budget import month_view

    db = open_db()
    try:
        rows = month_view(db)
    finally:
        db.dispose()
    if as_json:
        typer.echo(json.dumps(rows))
        return
    for row in rows:
        budget = "-" if row["budget_usd"] is None else f"${row['budget_usd']:.2f}"
        typer.echo(f"{row['team']}\t{row['month']}\t${row['spent_usd']:.4f}\t{budget}\t"
                   f"{row['percent'] if row['percent'] is not None else '-'}%\t"
                   f"alerts {row['alerts']}")
