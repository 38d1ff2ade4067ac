"""``TeamStore``: teams, the repositories assigned to them, and which team a new row belongs to.

A repository is assigned by an ``owner/name`` pattern (``fnmatch``: ``acme/*``, ``acme/api-?``);
the most specific matching pattern decides (the longest, then the one with fewer wildcards). A
repository no pattern matches belongs to no team: a team token may work on it (its rows carry
the token's team), a deployment-wide caller's work on it goes to the ``default`` team
(:func:`owning_team`).
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy import delete, func, select

from services.db.errors import NotFound
from services.db.models import (
    DEFAULT_TEAM,
    ApiToken,
    Flowchart,
    McpServer,
    NodeExecution,
    Team,
    TeamRepository,
)
from services.db.session import Database, dialect_insert
from services.execution.errors import ErrorCode, StudioError

TEAM_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
PATTERN = re.compile(r"^[A-Za-z0-9_.*?-]+/[A-Za-z0-9_.*?-]+$")
MAX_BUDGET_USD = 10_000_000.0


class UnknownTeam(NotFound):
    """No team has this name (or id)."""

    what = "team"


class InvalidTeam(ValueError):
    """A team name, repository pattern, budget or notification URL that cannot be stored."""


class RepositoryNotInTeam(StudioError):
    """Work asked on a repository assigned to another team (403 ``repository_not_in_team``)."""

    default_code = ErrorCode.REPOSITORY_NOT_IN_TEAM


@dataclass(frozen=True)
class TeamInfo:
    id: str
    name: str
    monthly_budget_usd: float | None
    notify_url: str | None
    repositories: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "monthly_budget_usd": self.monthly_budget_usd,
                "notify_url": self.notify_url, "repositories": list(self.repositories)}


def check_name(name: str) -> str:
    if not TEAM_NAME.match(name):
        raise InvalidTeam(f"a team name is 1-64 of a-z, 0-9, '_' and '-', starting with a letter "
                          f"or digit; got {name[:80]!r}")
    return name


def check_budget(budget: float | None) -> float | None:
    if budget is None:
        return None
    if not (0 <= budget <= MAX_BUDGET_USD) or budget != budget:
        raise InvalidTeam(f"a monthly budget is between 0 and {MAX_BUDGET_USD:.0f} USD")
    return float(budget)


def check_notify_url(url: str | None) -> str | None:
    if url is None or url == "":
        return None
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname or len(url) > 2048 \
            or parts.username or parts.password or any(ord(c) < 0x21 for c in url):
        raise InvalidTeam("a notification URL is an http(s) URL without credentials or spaces")
    return url


def check_pattern(pattern: str) -> str:
    if len(pattern) > 512 or not PATTERN.match(pattern):
        raise InvalidTeam(f"a repository pattern is owner/name (wildcards * and ?); "
                          f"got {pattern[:80]!r}")
    return pattern


def repository_slug(repo_url: str) -> str | None:
    """``owner/name`` of a repository URL (its path's last two segments, ``.git`` dropped)."""
    path = urlsplit(repo_url).path if "://" in repo_url else repo_url
    parts = [part for part in path.strip("/").split("/") if part]
    if len(parts) < 2:
        return None
    name = parts[-1][:-4] if parts[-1].endswith(".git") else parts[-1]
    return f"{parts[-2]}/{name}"


def _specificity(pattern: str) -> tuple[int, int]:
    return len(pattern), -sum(pattern.count(c) for c in "*?")


class TeamStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    def create(self, name: str, *, monthly_budget_usd: float | None = None,
               notify_url: str | None = None) -> TeamInfo:
        check_name(name)
        row = Team(name=name, monthly_budget_usd=check_budget(monthly_budget_usd),
                   notify_url=check_notify_url(notify_url))
        with self._db.session() as session:
            if session.scalars(select(Team).where(Team.name == name)).first() is not None:
                raise InvalidTeam(f"a team named {name!r} exists")
            session.add(row)
        return TeamInfo(row.id, row.name, row.monthly_budget_usd, row.notify_url)

    def update(self, name: str, *, monthly_budget_usd: float | None | str = "keep",
               notify_url: str | None = "keep") -> TeamInfo:
        """Change the budget (``None``: no cap) and/or the notification URL (``""``: none)."""
        with self._db.session() as session:
            row = self._row(session, name)
            if monthly_budget_usd != "keep":
                assert not isinstance(monthly_budget_usd, str)
                row.monthly_budget_usd = check_budget(monthly_budget_usd)
            if notify_url != "keep":
                row.notify_url = check_notify_url(notify_url)
        return self.get(name)

    def delete(self, name: str) -> None:
        """Delete a team that owns nothing (no execution, flowchart, token, MCP server)."""
        with self._db.session() as session:
            row = self._row(session, name)
            if name == DEFAULT_TEAM:
                raise InvalidTeam("the default team stays")
            for model in (NodeExecution, Flowchart, ApiToken, McpServer):
                owned = session.scalar(select(func.count()).select_from(model)
                                       .where(model.team_id == row.id))
                if owned:
                    raise InvalidTeam(f"team {name!r} still owns rows ({model.__tablename__})")
            session.delete(row)

    def _row(self, session: Any, name: str) -> Team:
        row = session.scalars(select(Team).where(Team.name == name)).first()
        if row is None:
            raise UnknownTeam(name)
        assert isinstance(row, Team)
        return row

    def get(self, name: str) -> TeamInfo:
        found = [team for team in self.list() if team.name == name]
        if not found:
            raise UnknownTeam(name)
        return found[0]

    def id_of(self, name: str) -> str:
        return self.get(name).id

    def list(self) -> list[TeamInfo]:
        with self._db.read_session() as session:
            teams = list(session.scalars(select(Team).order_by(Team.name)))
            patterns = list(session.execute(select(TeamRepository.team_id,
                                                   TeamRepository.pattern)
                                            .order_by(TeamRepository.pattern)))
        return [TeamInfo(t.id, t.name, t.monthly_budget_usd, t.notify_url,
                         tuple(p for team_id, p in patterns if team_id == t.id)) for t in teams]

    def names(self) -> dict[str, str]:
        """``{id: name}`` of every team."""
        return {team.id: team.name for team in self.list()}

    def assign(self, pattern: str, team: str) -> None:
        """Assign repositories matching ``pattern`` to ``team`` (a pattern has one team)."""
        check_pattern(pattern)
        team_id = self.id_of(team)
        with self._db.session() as session:
            row = session.get(TeamRepository, pattern)
            if row is None:
                session.add(TeamRepository(pattern=pattern, team_id=team_id))
            else:
                row.team_id = team_id

    def unassign(self, pattern: str) -> bool:
        with self._db.session() as session:
            result = session.execute(delete(TeamRepository)
                                     .where(TeamRepository.pattern == pattern))
            return bool(result.rowcount)  # type: ignore[attr-defined]

    def repository_team(self, repo_url: str) -> str | None:
        """The id of the team ``repo_url`` is assigned to, or ``None``."""
        slug = repository_slug(repo_url)
        if slug is None:
            return None
        with self._db.read_session() as session:
            rows = list(session.execute(select(TeamRepository.pattern, TeamRepository.team_id)))
        matches = [(str(p), str(t)) for p, t in rows if fnmatch.fnmatchcase(slug, str(p))]
        if not matches:
            return None
        return max(matches, key=lambda match: _specificity(match[0]))[1]

    def default_team_id(self) -> str:
        """The ``default`` team's id (made when missing: a database created at this revision
        has it from the migration; this covers one whose default team was renamed away)."""
        with self._db.read_session() as session:
            found = session.scalars(select(Team.id).where(Team.name == DEFAULT_TEAM)).first()
        if found is not None:
            return str(found)
        # two first creations at once may both get here: one insert wins, both read its id
        with self._db.session() as session:
            session.execute(dialect_insert(session)(Team).values(name=DEFAULT_TEAM)
                            .on_conflict_do_nothing(index_elements=["name"]))
        with self._db.read_session() as session:
            return str(session.scalars(select(Team.id).where(Team.name == DEFAULT_TEAM)).one())


def owning_team(db: Database, repo_url: str | None, caller_team: str | None) -> str:
    """The team a new execution (or flowchart, run) belongs to: the caller's team, refused
    (:class:`RepositoryNotInTeam`) when the repository is assigned to another one; for a
    deployment-wide caller, the repository's team, else ``default``."""
    store = TeamStore(db)
    assigned = store.repository_team(repo_url) if repo_url else None
    if caller_team is not None:
        if assigned is not None and assigned != caller_team:
            raise RepositoryNotInTeam(
                "this repository is assigned to another team",
                details={"repository": repository_slug(repo_url or "")})
        return caller_team
    return assigned or store.default_team_id()


def team_of_row(db: Database, model: Any, key: Any, ident: str) -> tuple[bool, str | None]:
    """``(found, team_id)`` of the row of ``model`` (a :class:`TeamOwned` table) whose column
    ``key`` is ``ident``."""
    with db.read_session() as session:
        row = session.execute(select(model.team_id).where(key == ident)).first()
    return (False, None) if row is None else (True, row[0])
