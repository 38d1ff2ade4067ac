"""Per-execution PostgreSQL logins (``services.db.execution_logins``, migration 0013) on the real
server: the login of one execution reaches that execution's rows and nothing of any other
execution, nor the tables that hold the deployment's secrets. Each refusal has its positive
control: the same statement through the deployment's own connection (or the login on its own
rows) does reach the witness row, so the refusal is the policy, not an empty table."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterator
from datetime import date

import pytest
from sqlalchemy import create_engine, event, make_url, text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import OperationalError, ProgrammingError

from services.db.execution_logins import (
    ExecutionLoginError,
    ExecutionLogins,
    login_role,
    scram_verifier,
)
from services.db.session import Database
from services.runs.reaper import reap_logins
from tests.support.settings import studio_settings

SECRET_HASH = "witness-token-hash-0123456789abcdef"
MINE_REPO = "https://github.com/acme/mine"
THEIRS_REPO = "https://github.com/acme/theirs"


def _seed(db: Database, mine: str, theirs: str) -> None:
    with db.transaction() as c:
        for eid, repo in ((mine, MINE_REPO), (theirs, THEIRS_REPO)):
            c.execute(text(
                "INSERT INTO node_executions (id, status, runtime, provider, model, repo_url, "
                "request, prompt, limits, settings_snapshot, cost_usd, iterations, "
                "cancel_requested, event_seq, lease_epoch, yielded_attempts, created_at, "
                "updated_at) VALUES (:id, 'queued', 'agent', 'openai', 'm', :repo, '{}', "
                "'secret prompt', '{}', '{}', 0, 0, false, 1, 0, 0, now(), now())"),
                {"id": eid, "repo": repo})
            c.execute(text("INSERT INTO execution_events (execution_id, seq, kind, cycle, data, "
                           "created_at) VALUES (:id, 1, 'started', 0, '{}', now())"), {"id": eid})
            c.execute(text("INSERT INTO budget_ledger (repository, day, spent_micros, "
                           "overflow_micros, updated_at) VALUES (:repo, :day, 5, 0, now())"),
                      {"repo": repo, "day": date(2026, 11, 28)})
        c.execute(text("INSERT INTO api_tokens (id, name, token_hash, scopes, created_at) "
                       "VALUES (:id, 'admin', :hash, '[\"admin\"]', now())"),
                  {"id": str(uuid.uuid4()), "hash": SECRET_HASH})
        c.execute(text("INSERT INTO integrations (kind, api_url, token_encrypted, git_origins, "
                       "updated_at) VALUES ('github', 'https://api.github.com', "
                       "'\\x0102'::bytea, '[]', now())"))
        c.execute(text("INSERT INTO mcp_servers (id, name, transport, config, secret_encrypted, "
                       "enabled, created_at, updated_at) VALUES (:id, 'm', 'http', '{}', "
                       "'\\x0304'::bytea, true, now(), now())"), {"id": str(uuid.uuid4())})


@pytest.fixture
def ids(postgres_db: Database) -> Iterator[tuple[str, str]]:
    mine, theirs = str(uuid.uuid4()), str(uuid.uuid4())
    _seed(postgres_db, mine, theirs)
    yield mine, theirs
    logins = ExecutionLogins(postgres_db, "postgresql://unused")
    logins.revoke(mine)
    logins.revoke(theirs)


@pytest.fixture
def login(postgres_db: Database, postgres_url: str,
          ids: tuple[str, str]) -> Iterator[Engine]:
    issued = ExecutionLogins(postgres_db, postgres_url).issue(ids[0], 600)
    assert issued.role == login_role(ids[0])
    engine = create_engine(issued.url.get_secret_value())
    yield engine
    engine.dispose()


def _scalar(engine: Engine, sql: str, **params: object) -> object:
    with engine.begin() as c:
        return c.execute(text(sql), params).scalar()


def test_the_login_sees_its_own_execution_only(postgres_db: Database, login: Engine,
                                               ids: tuple[str, str]) -> None:
    mine, theirs = ids
    # the positive control: the deployment's connection sees both executions and both journals
    assert _scalar(postgres_db.engine, "SELECT count(*) FROM node_executions") == 2
    assert _scalar(postgres_db.engine, "SELECT count(*) FROM execution_events") == 2
    assert _scalar(login, "SELECT string_agg(id, ',') FROM node_executions") == mine
    assert _scalar(login, "SELECT count(*) FROM node_executions WHERE id = :id",
                   id=theirs) == 0
    assert _scalar(login, "SELECT count(*) FROM execution_events WHERE execution_id = :id",
                   id=theirs) == 0
    assert _scalar(login, "SELECT count(*) FROM execution_events") == 1
    assert _scalar(login, "SELECT string_agg(repository, ',') FROM budget_ledger") == MINE_REPO


def test_the_login_writes_its_own_rows_and_no_one_elses(postgres_db: Database, login: Engine,
                                                        ids: tuple[str, str]) -> None:
    mine, theirs = ids
    insert = ("INSERT INTO execution_events (execution_id, seq, kind, cycle, data, created_at) "
              "VALUES (:id, 2, 'x', 0, '{}', now())")
    with login.begin() as c:  # its own journal: allowed (the positive control)
        c.execute(text(insert), {"id": mine})
        updated = c.execute(text("UPDATE node_executions SET status = 'cancelled' "
                                 "WHERE id = :id"), {"id": theirs}).rowcount
    assert updated == 0
    with pytest.raises(ProgrammingError, match="row-level security"), login.begin() as c:
        c.execute(text(insert), {"id": theirs})
    with pytest.raises(ProgrammingError, match="row-level security"), login.begin() as c:
        c.execute(text("UPDATE execution_events SET execution_id = :other "
                       "WHERE execution_id = :id"), {"id": mine, "other": theirs})
    with pytest.raises(ProgrammingError, match="permission denied"), login.begin() as c:
        c.execute(text("DELETE FROM node_executions WHERE id = :id"), {"id": mine})
    assert _scalar(postgres_db.engine, "SELECT status FROM node_executions WHERE id = :id",
                   id=theirs) == "queued"
    assert _scalar(postgres_db.engine, "SELECT count(*) FROM execution_events WHERE "
                   "execution_id = :id", id=theirs) == 1


@pytest.mark.parametrize("sql", [
    "SELECT token_hash FROM api_tokens",
    "SELECT secret_encrypted FROM mcp_servers",
    "SELECT name FROM mcp_servers",
    "SELECT token_encrypted FROM integrations",
    "SELECT * FROM integrations",
    "SELECT count(*) FROM flowcharts",
    "SELECT count(*) FROM flowchart_runs",
])
def test_the_secret_tables_are_closed_to_the_login(postgres_db: Database, login: Engine,
                                                   sql: str) -> None:
    with postgres_db.engine.begin() as c:  # the positive control: the rows are there
        c.execute(text(sql)).all()
    assert _scalar(postgres_db.engine, "SELECT token_hash FROM api_tokens") == SECRET_HASH
    with pytest.raises(ProgrammingError, match="permission denied"), login.begin() as c:
        c.execute(text(sql)).all()


def test_the_login_reads_what_execute_needs_of_the_shared_tables(login: Engine) -> None:
    assert _scalar(login, "SELECT api_url FROM integrations") == "https://api.github.com"
    assert _scalar(login, "SELECT count(*) FROM runtime_settings") == 0
    assert _scalar(login, "SELECT count(*) FROM alembic_version") == 1


def test_the_journal_commit_function_cannot_reach_another_execution(
        login: Engine, ids: tuple[str, str]) -> None:
    mine, theirs = ids
    call = "SELECT studio_journal_commit(CAST(:p AS json))"
    payload = ('{"execution_id": "%s", "epoch": null, "events": [{"kind": "k", "cycle": 0, '
               '"data": {}}], "blobs": [], "ops": []}')
    assert _scalar(login, call, p=payload % mine) is not None
    with pytest.raises(Exception, match="unknown execution"), login.begin() as c:
        c.execute(text(call), {"p": payload % theirs})


def _stored(db: Database, role: str) -> tuple[str, object]:
    with db.engine.begin() as c:  # the test's user is a superuser: pg_authid is readable
        row = c.execute(text("SELECT rolpassword, rolvaliduntil > now() FROM pg_authid "
                             "WHERE rolname = :r"), {"r": role}).one()
    return str(row[0]), row[1]


def _verifies(verifier: str, url: str) -> bool:
    """Whether the stored SCRAM verifier is the one of the URL's password (trust authentication
    on this test server skips the password, so it is checked against the stored verifier)."""
    password = make_url(url).password
    salt = base64.b64decode(verifier.split("$")[1].split(":")[1])
    return scram_verifier(str(password), salt=salt) == verifier


def test_a_revoked_login_cannot_connect(postgres_db: Database, postgres_url: str,
                                        ids: tuple[str, str]) -> None:
    logins = ExecutionLogins(postgres_db, postgres_url)
    issued = logins.issue(ids[0], 600)
    engine = create_engine(issued.url.get_secret_value())
    assert _scalar(engine, "SELECT current_user") == issued.role  # the positive control
    engine.dispose()
    logins.revoke(ids[0])
    with pytest.raises(OperationalError, match="does not exist"):
        _scalar(create_engine(issued.url.get_secret_value()), "SELECT 1")


def test_an_expired_login_is_marked_and_swept(postgres_db: Database, postgres_url: str,
                                              ids: tuple[str, str]) -> None:
    logins = ExecutionLogins(postgres_db, postgres_url)
    live = logins.issue(ids[0], 600)
    expired = logins.issue(ids[1], -60)
    assert _stored(postgres_db, live.role)[1] is True
    assert _stored(postgres_db, expired.role)[1] is False
    assert logins.expired() == [expired.role] or expired.role in logins.expired()
    assert live.role not in logins.expired()
    assert logins.drop_expired() >= 1
    assert expired.role not in logins.expired()
    assert _scalar(postgres_db.engine, "SELECT count(*) FROM pg_roles WHERE rolname = :r",
                   r=live.role) == 1


def test_a_renewed_login_has_a_new_password(postgres_db: Database, postgres_url: str,
                                            ids: tuple[str, str]) -> None:
    logins = ExecutionLogins(postgres_db, postgres_url)
    first = logins.issue(ids[0], 600)
    verifier = _stored(postgres_db, first.role)[0]
    assert _verifies(verifier, first.url.get_secret_value())  # the positive control
    assert make_url(first.url.get_secret_value()).password not in verifier
    second = logins.issue(ids[0], 600)
    renewed = _stored(postgres_db, second.role)[0]
    assert first.url.get_secret_value() != second.url.get_secret_value()
    assert _verifies(renewed, second.url.get_secret_value())
    assert not _verifies(renewed, first.url.get_secret_value())


@pytest.mark.parametrize("hostile", ["x; DROP TABLE api_tokens", "../..", "",
                                     "5A1B2C3D-4E5F-4A6B-8C7D-8E9F0A1B2C3D",
                                     "{5a1b2c3d-4e5f-4a6b-8c7d-8e9f0a1b2c3d}"])
def test_a_hostile_execution_id_makes_no_role(postgres_db: Database, hostile: str) -> None:
    with pytest.raises(ExecutionLoginError) as raised:
        ExecutionLogins(postgres_db, "postgresql://h/db").issue(hostile, 60)
    assert raised.value.details == {"reason": "bad_id"}


def test_the_password_reaches_the_server_only_as_a_verifier() -> None:
    verifier = scram_verifier("pw-witness", salt=b"0123456789abcdef")
    assert verifier.startswith("SCRAM-SHA-256$4096:") and "pw-witness" not in verifier


def test_the_reaper_drops_expired_logins_only(postgres_db: Database, postgres_url: str,
                                              ids: tuple[str, str]) -> None:
    logins = ExecutionLogins(postgres_db, postgres_url)
    live = logins.issue(ids[0], 600)
    expired = logins.issue(ids[1], -60)
    settings = studio_settings(kube_execution_logins=True)
    assert reap_logins(postgres_db, studio_settings()) == 0  # off without logins
    assert expired.role in logins.expired()
    assert reap_logins(postgres_db, settings) >= 1
    with postgres_db.engine.connect() as connection:
        roles = {row[0] for row in connection.execute(
            text("SELECT rolname FROM pg_roles WHERE rolname LIKE 'studio%'"))}
    assert live.role in roles and expired.role not in roles


@pytest.mark.parametrize("column, value", [
    ("limits", "'{\"max_cost_usd\": 1000000}'"), ("settings_snapshot", "'{}'"),
    ("repo_url", "'https://github.com/acme/theirs'"), ("cancel_requested", "true"),
    ("prompt", "'another task'"), ("provider", "'gemini'")])
def test_the_login_cannot_rewrite_what_its_execution_was_asked(
        login: Engine, ids: tuple[str, str], column: str, value: str) -> None:
    with login.begin() as c:  # the positive control: the columns the executor writes
        assert c.execute(text("UPDATE node_executions SET status = 'running', iterations = 1 "
                              "WHERE id = :id"), {"id": ids[0]}).rowcount == 1
    with pytest.raises(ProgrammingError, match="permission denied"), login.begin() as c:
        c.execute(text(f"UPDATE node_executions SET {column} = {value} WHERE id = :id"),
                  {"id": ids[0]})


@pytest.mark.parametrize("escape", ["SET ROLE studio_executor",
                                    "SET SESSION AUTHORIZATION studio_executor",
                                    "RESET ROLE"])
def test_switching_roles_does_not_widen_the_login(postgres_db: Database, login: Engine,
                                                  ids: tuple[str, str], escape: str) -> None:
    """A login is a member of ``studio_executor``: ``SET ROLE`` to it changes ``current_user``
    but not ``session_user``, which is what the policies go by."""
    assert _scalar(postgres_db.engine, "SELECT count(*) FROM node_executions") == 2  # control
    with login.begin() as c:
        try:
            with c.begin_nested():
                c.execute(text(escape))
        except (ProgrammingError, OperationalError):
            pass  # refused outright: nothing to widen
        assert c.execute(text("SELECT count(*) FROM node_executions")).scalar() == 1
        assert c.execute(text("SELECT count(*) FROM execution_events WHERE execution_id = "
                              ":id"), {"id": ids[1]}).scalar() == 0


@pytest.mark.parametrize("sql", ["CREATE TABLE public.planted (x int)",
                                 "CREATE FUNCTION public.studio_login_execution(x int) "
                                 "RETURNS text LANGUAGE sql AS $$ SELECT 'x' $$",
                                 "CREATE ROLE studio_exec_00000000000000000000000000000000",
                                 "GRANT pg_read_all_data TO CURRENT_USER"])
def test_the_login_cannot_plant_objects_or_roles(login: Engine, sql: str) -> None:
    with pytest.raises(ProgrammingError, match="permission denied|must have admin option"), \
            login.begin() as c:
        c.execute(text(sql))


def test_no_statement_sent_to_the_server_holds_the_password(
        postgres_db: Database, postgres_url: str, ids: tuple[str, str]) -> None:
    """Every statement the issuing connection sends (a SQLAlchemy cursor event on the real
    engine: what goes over the wire, and what a server logging DDL would log) holds the SCRAM
    verifier, never the password the login's URL carries."""
    sent: list[str] = []

    def record(conn: object, cursor: object, statement: str, *args: object) -> None:
        sent.append(statement)

    event.listen(postgres_db.engine, "before_cursor_execute", record)
    try:
        issued = ExecutionLogins(postgres_db, postgres_url).issue(ids[0], 600)
    finally:
        event.remove(postgres_db.engine, "before_cursor_execute", record)
    password = str(make_url(issued.url.get_secret_value()).password)
    ddl = [s for s in sent if "ROLE" in s]
    assert ddl and all("SCRAM-SHA-256$4096:" in s for s in ddl)  # the positive control
    assert not [s for s in sent if password in s]
