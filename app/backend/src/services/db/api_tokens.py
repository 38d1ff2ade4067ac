"""``ApiTokenRepository``: bearer tokens of the HTTP API, stored as SHA-256 hashes only.

A token is 32 random bytes (``secrets.token_urlsafe(32)``) prefixed ``studio_``; it is shown once,
when created, and never stored: the table keeps ``sha256(token)``. :meth:`verify` looks the hash up
and compares it again in constant time (``hmac.compare_digest``), so the lookup answers nothing a
timing attack could use. Scopes are exact: ``read``, ``run``, ``approve``, ``admin`` (none
implies another). A token belongs to a team (``team_id``) or, without one, is deployment-wide.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from enum import StrEnum

from sqlalchemy import select

from services.db.base import utcnow
from services.db.models import ApiToken
from services.db.session import Database

TOKEN_PREFIX = "studio_"


class Scope(StrEnum):
    READ = "read"
    RUN = "run"
    APPROVE = "approve"
    ADMIN = "admin"


class InvalidScopes(ValueError):
    """A scope list with an unknown or no scope."""


@dataclass(frozen=True)
class TokenIdentity:
    """Who a verified token belongs to."""

    id: str
    name: str
    scopes: frozenset[str]
    team_id: str | None = None  # None: deployment-wide


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def parse_scopes(raw: str | list[str]) -> list[str]:
    """``"read,run"`` or ``["read", "run"]`` as a sorted list of known scopes."""
    items = raw.split(",") if isinstance(raw, str) else raw
    scopes = {item.strip() for item in items if item.strip()}
    known = {scope.value for scope in Scope}
    unknown = scopes - known
    if unknown or not scopes:
        raise InvalidScopes(f"scopes must be a non-empty subset of {sorted(known)}, "
                            f"got {sorted(scopes) or 'none'}")
    return sorted(scopes)


class ApiTokenRepository:
    def __init__(self, db: Database) -> None:
        self._db = db

    def create(self, name: str, scopes: str | list[str],
               team_id: str | None = None) -> tuple[str, str]:
        """Store a new token (of ``team_id``'s team, else deployment-wide); answers
        ``(id, token)``: the token itself exists only here."""
        checked = parse_scopes(scopes)
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        row = ApiToken(name=name, token_hash=token_hash(token), scopes=checked, team_id=team_id)
        with self._db.session() as session:
            session.add(row)
        return row.id, token

    def verify(self, token: str) -> TokenIdentity | None:
        """The identity of a valid, unrevoked token, else ``None``."""
        digest = token_hash(token)
        with self._db.session() as session:
            row = session.scalars(select(ApiToken).where(ApiToken.token_hash == digest)).first()
            if row is None or row.revoked_at is not None:
                return None
            if not hmac.compare_digest(row.token_hash.encode(), digest.encode()):
                return None
            return TokenIdentity(id=row.id, name=row.name, scopes=frozenset(row.scopes or []),
                                 team_id=row.team_id)

    def revoke(self, token_id: str) -> bool:
        """Revoke a token by id; answers whether it existed."""
        with self._db.session() as session:
            row = session.get(ApiToken, token_id)
            if row is None:
                return False
            row.revoked_at = utcnow()
            return True
