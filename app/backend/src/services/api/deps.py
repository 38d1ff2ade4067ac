"""What handlers need, read from ``app.state`` (set once by :func:`services.api.app.create_app`).

Use them as FastAPI dependencies: ``db: Database = Depends(get_db)``.
"""

from __future__ import annotations

from fastapi import Request

from services.api.launcher import Launcher
from services.db.session import Database
from services.settings import StudioSettings


def get_db(request: Request) -> Database:
    db: Database = request.app.state.db
    return db


def get_settings(request: Request) -> StudioSettings:
    settings: StudioSettings = request.app.state.settings
    return settings


def get_launcher(request: Request) -> Launcher:
    launcher: Launcher = request.app.state.launcher
    return launcher
