"""``studio review --repo URL --pr N``: review a pull request here and post the review.

Records a review execution (:func:`services.runs.review_start.start_review`) and runs it in this
process on the durable path (its journal printed live); the review is posted once on GitHub.
Exit codes as ``studio execute``: 0 when the review was posted, 1 when the execution failed
(``review_invalid`` among others), 2 for a configuration error.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer


def review_command(
    repo: Annotated[str, typer.Option(help="The repository URL (or a local path).")],
    pr: Annotated[int, typer.Option(min=1, max=9_999_999, help="The pull request number.")],
    head_sha: Annotated[str | None, typer.Option(
        help="The head commit to review (default: the pull request's head).")] = None,
    github_repo: Annotated[str | None, typer.Option(
        help="OWNER/NAME on GitHub when the URL does not end in it.")] = None,
    provider: Annotated[str, typer.Option(help="codex | gemini | claude | replay")] = "codex",
    model: Annotated[str | None, typer.Option(help="Model name (provider default).")] = None,
    script: Annotated[Path | None, typer.Option(help="Replay script (JSON).")] = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print one JSON line last.")] = False,
) -> None:
    """Review a pull request (read-only) and post one GitHub review with inline comments."""
    from services.cli.database import open_db
    from services.cli.execute import report
    from services.cli.live import LiveConsoleSink
    from services.execution.errors import ConfigError
    from services.runs.review_start import start_review
    from services.runs.service import ExecutionService
    from services.settings import get_settings

    settings = get_settings()
    db = open_db()
    try:
        turns = json.loads(script.read_text()) if script is not None else None
        execution_id = start_review(db, settings, repo, pr, head_sha=head_sha,
                                    provider=provider, model=model, script=turns,
                                    github_repo=github_repo, allow_local=True)
        typer.echo(f"studio: review execution {execution_id}", err=True)
        outcome = ExecutionService(db, settings).execute_recorded(
            execution_id, sinks=[LiveConsoleSink()])
    except (ConfigError, OSError, ValueError) as exc:
        typer.echo(f"studio: {getattr(exc, 'message', exc)}", err=True)
        raise typer.Exit(2) from exc
    finally:
        db.dispose()
    report(outcome, json_output)
