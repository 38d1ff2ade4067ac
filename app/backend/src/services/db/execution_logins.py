"""Per-execution PostgreSQL logins: what an executor pod connects with instead of the
deployment's database URL.

:meth:`ExecutionLogins.issue` creates (or renews) the role ``studio_exec_<execution id without
dashes>``: LOGIN, a fresh random password, ``VALID UNTIL`` a deadline, a member of the group
role ``studio_executor`` whose grants and row-level security policies (migration 0013) let it
reach only the rows of that one execution. The password is sent to the server only as a
SCRAM-SHA-256 verifier computed here, so a server that logs DDL never logs it. The URL it
returns is the deployment's URL with that role and password: it is a secret (a
:class:`~pydantic.SecretStr`), handed to the pod in a Secret of its own, never logged.
:meth:`ExecutionLogins.revoke` drops the role once the execution's Job is gone.

The connecting user needs CREATEROLE and ``studio_executor`` WITH ADMIN OPTION. PostgreSQL
only: :meth:`issue` refuses another database with :class:`ExecutionLoginError`.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from pydantic import SecretStr
from sqlalchemy import create_engine, make_url, text
from sqlalchemy.pool import NullPool

from services.db.base import utcnow
from services.db.session import Database
from services.execution.errors import ConfigError

GROUP_ROLE = "studio_executor"
LOGIN_PREFIX = "studio_exec_"
SCRAM_ITERATIONS = 4096
# A pod's engine pools at most 15 connections (SQLAlchemy's 5 + 10); the limit bounds what a
# compromised pod can take of the server's max_connections.
CONNECTION_LIMIT = 32
_LOGIN_NAME = re.compile(r"^studio_exec_[0-9a-f]{32}$")


class ExecutionLoginError(ConfigError):
    """A login that cannot be made: not PostgreSQL, or an execution id that is not a UUID."""


@dataclass(frozen=True)
class ExecutionLogin:
    role: str
    valid_until: datetime
    url: SecretStr


def login_role(execution_id: str) -> str:
    """``studio_exec_<32 hex digits>``: the role of one execution (a canonical UUID id only)."""
    try:
        parsed = uuid.UUID(execution_id)
    except ValueError:
        raise ExecutionLoginError(
            "an execution login needs a UUID execution id", details={"reason": "bad_id"}
        ) from None
    if str(parsed) != execution_id:
        raise ExecutionLoginError(
            "an execution login needs a canonical UUID execution id",
            details={"reason": "bad_id"})
    return LOGIN_PREFIX + parsed.hex


def scram_verifier(password: str, salt: bytes | None = None) -> str:
    """The SCRAM-SHA-256 verifier PostgreSQL stores for ``password`` (RFC 5802/7677)."""
    salt = salt or secrets.token_bytes(16)
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, SCRAM_ITERATIONS)
    client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
    stored_key = hashlib.sha256(client_key).digest()
    server_key = hmac.new(salted, b"Server Key", hashlib.sha256).digest()
    encode = base64.b64encode
    return (f"SCRAM-SHA-256${SCRAM_ITERATIONS}:{encode(salt).decode()}"
            f"${encode(stored_key).decode()}:{encode(server_key).decode()}")


class ExecutionLogins:
    """Issues and revokes the logins of executions, through ``db`` (the worker's database)."""

    def __init__(self, db: Database, database_url: str) -> None:
        self._db = db
        self._url = database_url

    @classmethod
    def for_url(cls, database_url: str) -> ExecutionLogins:
        """Logins through a connection opened per statement (no pool kept open: a worker issues
        one login per launch and drops it at the end)."""
        return cls(Database(create_engine(database_url, poolclass=NullPool)), database_url)

    @property
    def db(self) -> Database:
        return self._db

    def issue(self, execution_id: str, valid_for_s: int) -> ExecutionLogin:
        """The execution's login with a new password, valid ``valid_for_s`` seconds."""
        if self._db.dialect != "postgresql":
            raise ExecutionLoginError("execution logins need PostgreSQL",
                                      details={"reason": "not_postgresql"})
        role = login_role(execution_id)
        password = secrets.token_urlsafe(32)
        valid_until = utcnow() + timedelta(seconds=valid_for_s)
        # DDL takes no bind parameters (and the verifier's ":" must not read as one): the role
        # name is checked above, the verifier and the timestamp are made here from safe alphabets.
        options = (f"LOGIN INHERIT CONNECTION LIMIT {CONNECTION_LIMIT} "
                   f"PASSWORD '{scram_verifier(password)}' "
                   f"VALID UNTIL '{valid_until.isoformat()}'")
        with self._db.transaction() as connection:
            exists = connection.execute(
                text("SELECT 1 FROM pg_roles WHERE rolname = :role"), {"role": role}
            ).first()
            if exists:
                connection.exec_driver_sql(f"ALTER ROLE {role} WITH {options}")
            else:
                connection.exec_driver_sql(
                    f"CREATE ROLE {role} WITH {options} IN ROLE {GROUP_ROLE}")
        url = make_url(self._url).set(username=role, password=password)
        return ExecutionLogin(role, valid_until,
                              SecretStr(url.render_as_string(hide_password=False)))

    def revoke(self, execution_id: str) -> None:
        """Drop the execution's login (a login already gone is fine)."""
        if self._db.dialect != "postgresql":
            return
        role = login_role(execution_id)
        with self._db.transaction() as connection:
            connection.execute(text(f"DROP ROLE IF EXISTS {role}"))

    def expired(self) -> list[str]:
        """The roles of logins past their ``VALID UNTIL`` (left by a worker that died)."""
        return expired_logins(self._db)

    def drop_expired(self) -> int:
        """Drop every expired login; how many."""
        return drop_expired_logins(self._db)


def expired_logins(db: Database) -> list[str]:
    """The roles of per-execution logins past their ``VALID UNTIL``."""
    with db.transaction() as connection:
        rows = connection.execute(text(
            "SELECT rolname FROM pg_roles WHERE rolname LIKE 'studio\\_exec\\_%' "
            "AND rolvaliduntil < now()")).all()
    return [str(row[0]) for row in rows if _LOGIN_NAME.match(str(row[0]))]


def drop_expired_logins(db: Database) -> int:
    """Drop every expired per-execution login (the reaper's pass); how many."""
    dropped = 0
    for role in expired_logins(db):
        with db.transaction() as connection:
            connection.exec_driver_sql(f"DROP ROLE IF EXISTS {role}")
        dropped += 1
    return dropped
