"""``studio teams ...`` and ``studio tokens create --team`` on a real database (SQLite and
PostgreSQL): what the commands store, and hostile values refused with exit 2 and nothing
stored."""

from __future__ import annotations

import json

from services.db.api_tokens import ApiTokenRepository
from services.db.session import Database, create_db_engine
from services.db.teams import TeamStore
from tests.integration.db.cli_helpers import studio


def test_teams_commands_store_what_they_say(db_url: str) -> None:
    assert studio(db_url, "teams", "create", "payments", "--budget", "250",
                  "--notify-url", "https://hooks.example/studio").returncode == 0
    assert studio(db_url, "teams", "assign", "acme/pay-*", "--team", "payments").returncode == 0
    assert studio(db_url, "teams", "set", "payments", "--budget", "300").returncode == 0
    made = studio(db_url, "tokens", "create", "--name", "ci", "--scopes", "read,run,approve",
                  "--team", "payments")
    assert made.returncode == 0, made.stderr
    listed = json.loads(studio(db_url, "teams", "list", "--json").stdout)
    payments = [t for t in listed if t["name"] == "payments"][0]
    assert (payments["monthly_budget_usd"], payments["repositories"]) == (300.0, ["acme/pay-*"])
    spend = json.loads(studio(db_url, "teams", "spend", "--json").stdout)
    assert [r for r in spend if r["team"] == "payments"][0]["alerts"] == []
    db = Database(create_db_engine(db_url))
    try:
        identity = ApiTokenRepository(db).verify(made.stdout.strip().splitlines()[-1])
        assert identity is not None and identity.team_id == TeamStore(db).id_of("payments")
        assert identity.scopes == frozenset({"read", "run", "approve"})
    finally:
        db.dispose()
    assert studio(db_url, "executions", "list", "--team", "payments", "--json").stdout.strip() \
        == "[]"


def test_hostile_values_are_refused_and_nothing_is_stored(db_url: str) -> None:
    for args in (("teams", "create", "<b>x</b>"), ("teams", "create", "x", "--budget", "-5"),
                 ("teams", "create", "y", "--notify-url", "file:///etc/passwd"),
                 ("teams", "assign", "../../etc", "--team", "default"),
                 ("teams", "assign", "a/b", "--team", "nobody"),
                 ("tokens", "create", "--name", "t", "--team", "nobody"),
                 ("executions", "list", "--team", "nobody")):
        done = studio(db_url, *args)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr and "<b>" not in done.stdout
    listed = json.loads(studio(db_url, "teams", "list", "--json").stdout)
    assert [t["name"] for t in listed] == ["default"]  # the control: the listing shows teams
    assert listed[0]["repositories"] == []
