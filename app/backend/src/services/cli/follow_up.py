"""``studio run --repo URL --pr-number N "..."``: a follow-up on pull request ``N`` through the
pull request's slot (:func:`services.triggers.slots.start_work`), with the repository's trigger
settings; the execution is dispatched like any other (a worker, or this process without a
broker). Prints one JSON line: ``outcome`` (``started`` | ``coalesced``) and ``execution_id``."""

from __future__ import annotations

import json

import typer

from services.cli.database import open_db
from services.execution.errors import StudioError
from services.settings import get_settings


def follow_up(repo_url: str, number: int, prompt: str) -> None:
    from services.db.triggers import TriggerStore
    from services.triggers.events import FOLLOW_UP
    from services.triggers.slots import start_work
    from services.worker.dispatch import dispatch_or_defer

    settings = get_settings()
    db = open_db()
    try:
        found = [t for t in TriggerStore(db).all() if t.repo_url == repo_url]
        if not found:
            typer.echo(f"studio run: no trigger has the repository {repo_url} (studio triggers "
                       "set)", err=True)
            raise typer.Exit(2)
        work = {"kind": FOLLOW_UP, "number": number,
                "comments": [{"author": "cli", "text": prompt}]}
        offered = start_work(db, settings, found[0].repository, number, work,
                             lambda execution_id: dispatch_or_defer(execution_id, settings))
    except StudioError as exc:
        typer.echo(f"studio run: {exc.code}: {exc.message}", err=True)
        raise typer.Exit(1) from exc
    finally:
        db.dispose()
    typer.echo(json.dumps({"outcome": offered.outcome, "execution_id": offered.execution_id},
                          separators=(",", ":")))
