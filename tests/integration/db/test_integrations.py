"""GitHub integration: encrypted at rest, never printed, never found in the database bytes."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from pydantic import SecretStr

from services.db.models import Integration
from services.db.session import Database
from services.execution.errors import ConfigError
from services.repos.integration_store import IntegrationStore
from services.settings import StudioSettings
from tests.integration.databases import url_of
from tests.integration.db.cli_helpers import studio
from tests.integration.db.helpers import all_rows_text
from tests.support.settings import studio_settings

TOKEN = "ghp_" + "Zr8Kx2Wq6Lp4Mv9Tn3Bc7Yd1Hs5Gf0Ja2Ue"
KEY = "a-long-random-secret-key-for-tests-0123456789"


def _settings(**values: object) -> StudioSettings:
    return studio_settings(secret_key=KEY, **values)


def _pg_dump_text(url: str) -> str:
    conninfo = url.replace("postgresql+psycopg://", "postgresql://")
    done = subprocess.run(["pg_dump", "--no-owner", conninfo], capture_output=True, check=True)
    return done.stdout.decode("utf-8", "replace")


def _stored_text(db: Database, tmp_path: Path) -> str:
    """What an attacker with the database would read: file bytes, a dump, or every row."""
    db.dispose()  # flush to the files as far as SQLite goes; the WAL is searched too
    if db.dialect == "sqlite":
        database = Path(str(db.engine.url.database))
        files = [p for p in database.parent.iterdir() if p.name.startswith(database.name)]
        return "\n".join(p.read_bytes().decode("latin-1") for p in files)
    if shutil.which("pg_dump"):
        return _pg_dump_text(url_of(db))
    return all_rows_text(db)


def test_token_round_trips_but_is_not_stored_in_plaintext(db: Database, tmp_path: Path) -> None:
    repo = IntegrationStore(db, _settings())
    repo.set_github(api_url="https://ghe.example.test/api/v3", token=SecretStr(TOKEN))
    github = repo.github()
    assert github.token is not None and github.token.get_secret_value() == TOKEN
    assert (github.api_url, github.api_url_source, github.token_source) == \
        ("https://ghe.example.test/api/v3", "database", "database")
    assert TOKEN not in repr(github) and TOKEN not in json.dumps(repo.describe())
    with db.session() as session:
        row = session.get(Integration, "github")
        assert row is not None and TOKEN not in repr(row) and TOKEN not in str(row)
    stored = _stored_text(db, tmp_path)
    assert "ghe.example.test" in stored  # the search does see the table's contents
    assert TOKEN not in stored


def test_refuses_to_store_without_a_key_and_with_a_wrong_key(db: Database) -> None:
    with pytest.raises(ConfigError, match="STUDIO_SECRET_KEY"):
        IntegrationStore(db, StudioSettings()).set_github(api_url=None,
                                                               token=SecretStr(TOKEN))
    IntegrationStore(db, _settings()).set_github(api_url=None, token=SecretStr(TOKEN))
    wrong = StudioSettings(secret_key=SecretStr("another-key-entirely-000000"))
    with pytest.raises(ConfigError, match="cannot be decrypted"):
        IntegrationStore(db, wrong).github()
    assert IntegrationStore(db, wrong).describe()[0]["token_set"] is True


def test_environment_wins(db: Database) -> None:
    IntegrationStore(db, _settings()).set_github(api_url="https://db.example.test",
                                                      token=SecretStr(TOKEN))
    settings = _settings(github_token=SecretStr("ghp_fromtheenvironment000000000000"),
                         github_api_url="https://env.example.test")
    github = IntegrationStore(db, settings).github()
    assert (github.api_url, github.api_url_source, github.token_source) == \
        ("https://env.example.test", "environment", "environment")


def test_cli_reads_the_token_from_stdin_and_never_prints_it(sqlite_db: Database) -> None:
    url, env = url_of(sqlite_db), {"STUDIO_SECRET_KEY": KEY}
    done = studio(url, "integrations", "set", "github", "--api-url", "https://ghe.example.test",
                  "--token-stdin", stdin=TOKEN + "\n", env=env)
    assert done.returncode == 0, done.stderr
    shown = studio(url, "integrations", "show", env=env)
    assert json.loads(shown.stdout)[0]["token_set"] is True
    for output in (done.stdout, done.stderr, shown.stdout, shown.stderr):
        assert TOKEN not in output
    github = IntegrationStore(sqlite_db, _settings()).github()
    assert github.token is not None and github.token.get_secret_value() == TOKEN
    refused = studio(url, "integrations", "set", "github", "--token-stdin", stdin=TOKEN + "\n")
    assert refused.returncode == 2 and "STUDIO_SECRET_KEY" in refused.stderr


def test_git_origins_come_from_the_environment_then_the_database_then_the_api_url(
        db: Database) -> None:
    repository = IntegrationStore(db, _settings())
    assert repository.git_origins().origins == {"https://github.com"}
    repository.set_github(api_url="https://ghe.example.test/api/v3", token=None)
    assert repository.git_origins().origins == {"https://ghe.example.test"}
    repository.set_github(api_url=None, token=None,
                          git_origins=["HTTPS://Git.Example.test:443/", "http://127.0.0.1:9"])
    stored = repository.git_origins()
    assert (stored.origins, stored.source) == (
        {"https://git.example.test", "http://127.0.0.1:9"}, "database")
    from_env = IntegrationStore(db, _settings(github_git_origins=["https://env.example"]))
    assert from_env.git_origins().origins == {"https://env.example"}
    repository.set_github(api_url=None, token=None, git_origins=[])
    assert repository.git_origins().source == "api_url"
    with pytest.raises(ConfigError):
        repository.set_github(api_url=None, token=None, git_origins=["https://x.example/path"])


def test_cli_stores_and_shows_the_git_origins(sqlite_db: Database) -> None:
    url, env = url_of(sqlite_db), {"STUDIO_SECRET_KEY": KEY}
    done = studio(url, "integrations", "set", "github", "--git-origins",
                  "https://ghe.example.test,http://127.0.0.1:8080", env=env)
    assert done.returncode == 0, done.stderr
    shown = json.loads(studio(url, "integrations", "show", env=env).stdout)[0]
    assert shown["git_origins"] == ["http://127.0.0.1:8080", "https://ghe.example.test"]
    assert shown["git_origins_source"] == "database"
    refused = studio(url, "integrations", "set", "github", "--git-origins", "ghe.example.test",
                     env=env)
    assert refused.returncode == 2 and "--git-origins" in refused.stderr
