"""``studio settings get|set|list`` and ``studio killswitch on|off``: runtime settings."""

from __future__ import annotations

import json
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any

import typer

from services.cli.database import open_db

if TYPE_CHECKING:
    from services.db.session import Database

app = typer.Typer(help="Runtime settings, read fresh by running executions.", no_args_is_help=True)


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def _parse(raw: str) -> Any:
    """JSON when it parses (``true``, ``3``, ``2.5``), else the plain string."""
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def _store(key: str, value: Any) -> Any:
    from services.db.runtime_settings import InvalidSettingValue, SettingsRepository, UnknownSetting

    db = open_db()
    try:
        stored = SettingsRepository(db).set(key, value)
        if key == "killswitch_engaged" and stored is False:
            _resume_paused(db)
        return stored
    except (UnknownSetting, InvalidSettingValue) as exc:
        typer.echo(f"studio: {exc}", err=True)
        raise typer.Exit(2) from exc
    finally:
        db.dispose()


def _resume_paused(db: Database) -> None:
    """The kill switch was released: dispatch what it paused (with a broker; without one, say
    how to resume them, since nothing else runs them)."""
    from services.cli.broker import broker_dispatch
    from services.db.pauses import PauseStore
    from services.runs.pauses import redispatch_paused
    from services.settings import get_settings

    broker = broker_dispatch(get_settings())
    if broker is None:
        paused = PauseStore(db).paused()
        if paused:
            typer.echo(f"{len(paused)} paused executions; without STUDIO_BROKER_URL nothing "
                       "dispatches them: run `studio execute ID` for each, or release the kill "
                       "switch through the API (`PUT /api/killswitch`)", err=True)
        return
    resumed = redispatch_paused(db, broker.execution, broker.node)
    if resumed:
        typer.echo(f"resumed {len(resumed)} paused executions", err=True)


@app.command("get")
def get(key: str) -> None:
    """Print the effective value of KEY as JSON."""
    from services.db.runtime_settings import SettingsRepository, UnknownSetting

    db = open_db()
    try:
        value = SettingsRepository(db).get(key)
    except UnknownSetting as exc:
        typer.echo(f"studio: {exc}", err=True)
        raise typer.Exit(2) from exc
    finally:
        db.dispose()
    typer.echo(_compact(value))


@app.command("set")
def set_(key: str, value: str) -> None:
    """Set KEY to VALUE (read as JSON, else as a string)."""
    stored = _store(key, _parse(value))
    typer.echo(f"{key} = {_compact(stored)}", err=True)
    typer.echo(_compact({"key": key, "value": stored}))


@app.command("list")
def list_() -> None:
    """Print every runtime setting with its effective value, as one JSON object."""
    from services.db.runtime_settings import SettingsRepository

    db = open_db()
    try:
        typer.echo(_compact(SettingsRepository(db).all()))
    finally:
        db.dispose()


class Switch(StrEnum):
    ON = "on"
    OFF = "off"


def killswitch(
    state: Annotated[Switch, typer.Argument(help="on: stop every execution.")],
) -> None:
    """Engage (on) or release (off) the kill switch: running executions pause before their next
    call (queued again) and nothing new starts; released, they resume where they were."""
    stored = _store("killswitch_engaged", state is Switch.ON)
    typer.echo(f"kill switch {'engaged' if stored else 'released'}", err=True)
    typer.echo(_compact({"key": "killswitch_engaged", "value": stored}))
