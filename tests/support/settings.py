"""The one factory tests build :class:`~services.settings.StudioSettings` with.

Not a fake: the real settings class, given explicit values so a test never depends on the
machine's ``STUDIO_*`` environment for what it sets. Secret fields (``database_url``,
``broker_url``, ``github_token``, ``secret_key``) may be passed as plain strings; they are
wrapped in :class:`~pydantic.SecretStr` here, as the environment loader would.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import SecretStr

from services.settings import StudioSettings

SECRET_FIELDS = ("database_url", "broker_url", "github_token", "secret_key")


def studio_settings(data_dir: Path | None = None, **values: Any) -> StudioSettings:
    """Settings with ``data_dir`` (when given) and ``values``; plain-string secrets wrapped."""
    for name in SECRET_FIELDS:
        if isinstance(values.get(name), str):
            values[name] = SecretStr(values[name])
    if data_dir is not None:
        values["data_dir"] = data_dir
    return StudioSettings(**values)


def sqlite_settings(path: Path, **values: Any) -> StudioSettings:
    """Settings on the SQLite file ``path`` (its folder as the data directory)."""
    return studio_settings(path.parent, database_url=f"sqlite:///{path}", **values)
