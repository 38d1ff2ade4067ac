"""The ``team_id`` column of a row a team owns (:class:`TeamOwned`), apart from the team tables
so that every model module can use it (:mod:`services.db.models.teams`)."""

from __future__ import annotations

from sqlalchemy import String
from sqlalchemy.orm import Mapped, declared_attr, mapped_column

DEFAULT_TEAM = "default"


class TeamOwned:
    """Mixin: the ``team_id`` column (indexed; a ``teams.id``) of a row a team owns. No foreign
    key: adding one to an existing SQLite table means copying it (a team that owns rows is not
    deleted: :mod:`services.db.teams`)."""

    @declared_attr
    def team_id(cls) -> Mapped[str | None]:  # noqa: N805
        return mapped_column(String(36), index=True, nullable=True)
