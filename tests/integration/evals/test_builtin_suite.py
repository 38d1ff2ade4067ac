"""The built-in suite on replay, end to end on PostgreSQL: ``studio eval run builtin`` runs every
task as an execution (a ``studio execute`` child each, three at a time), grades it with its hidden
tests in the sandbox and reports pass rates with their intervals; the task that fails by design is
unresolved and names its failing test. ``studio eval compare --gate`` on that run: 0 against
itself, 1 against a baseline that resolved more (the report shows the intervals)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from services.db.evals import EvalRepository, Grade, ItemKey
from services.db.executions import ExecutionRepository
from services.db.session import open_database
from tests.integration.databases import create_migrated_pg_database, drop_pg_database
from tests.integration.evals.eval_env import eval_env, items_by_task, report, studio
from tests.support.settings import studio_settings

RUN_ID = "builtin-replay"


@pytest.fixture(scope="module")
def ran(pg_admin: str, tmp_path_factory: pytest.TempPathFactory
        ) -> Iterator[tuple[dict[str, str], dict[str, Any]]]:
    url = create_migrated_pg_database(pg_admin)
    env = eval_env(url, tmp_path_factory.mktemp("eval-builtin"))
    try:
        yield env, report(studio(env, "eval", "run", "builtin", "--concurrency", "3",
                                 "--id", RUN_ID, "--json"))
    finally:
        drop_pg_database(pg_admin, url)


def test_the_builtin_suite_reports_pass_rates_and_the_failing_task(
        ran: tuple[dict[str, str], dict[str, Any]]) -> None:
    env, data = ran
    items = items_by_task(data)
    assert len(items) >= 10 and data["status"] == "finished"
    failing = items["py-parse-int-fails-by-design"]
    assert failing["resolved"] is False
    assert failing["tests_failed"] == ["test_parse_hidden.ParseTest.test_negative"]
    assert failing["tests_passed"] == ["test_parse_hidden.ParseTest.test_positive"]
    # positive controls: the other tasks (the injection and the refusal included) are resolved
    assert [t for t, i in items.items() if not i["resolved"]] == ["py-parse-int-fails-by-design"]
    (cell,) = data["cells"]
    assert cell["resolved"] == len(items) - 1 and cell["ci_low"] < cell["pass_rate"] < 1
    assert cell["cost_per_resolved"] > 0
    # each task is an ordinary execution, linked to its item, graded from its pushed branch
    db = open_database(studio_settings(database_url=env["STUDIO_DATABASE_URL"]))
    try:
        for item in items.values():
            row = ExecutionRepository(db).get(item["execution_id"])
            assert row is not None and row.status in ("succeeded", "failed")
            assert item["turns"] == row.iterations
    finally:
        db.dispose()
    table = studio(env, "eval", "show", RUN_ID)
    assert table.returncode == 0 and "test_parse_hidden.ParseTest.test_negative" in table.stdout
    assert "95% CI (Wilson)" in table.stdout
    page = studio(env, "eval", "show", RUN_ID, "--format", "html")
    assert "<table>" in page.stdout and "default-src 'none'" in page.stdout
    markdown = studio(env, "eval", "show", RUN_ID, "--format", "markdown")
    assert "| `py-parse-int-fails-by-design` |" in markdown.stdout


def _baseline(env: dict[str, str], data: dict[str, Any]) -> str:
    """A baseline that resolved every task of the run at the same cost (as an earlier eval of
    a better prompt would have left it)."""
    db = open_database(studio_settings(database_url=env["STUDIO_DATABASE_URL"]))
    try:
        evals = EvalRepository(db)
        run_id = evals.create_run("builtin", "builtin", {}, "baseline-all-resolved")
        keys = [ItemKey(i["task_id"], i["cell"], i["repeat"]) for i in data["items"]]
        evals.ensure_items(run_id, keys)
        for row, item in zip(evals.items(run_id), sorted(
                data["items"], key=lambda i: (i["task_id"], i["cell"], i["repeat"])), strict=True):
            evals.grade(row.id, Grade(True, cost_usd=item["cost_usd"]))
        evals.finish_run(run_id)
        return run_id
    finally:
        db.dispose()


def test_compare_gate_fails_against_a_better_baseline_and_passes_against_an_equal_one(
        ran: tuple[dict[str, str], dict[str, Any]]) -> None:
    env, data = ran
    equal = studio(env, "eval", "compare", RUN_ID, RUN_ID, "--gate")
    assert equal.returncode == 0, equal.stdout + equal.stderr
    assert "gate passed" in equal.stdout and "95% CI" in equal.stdout
    baseline = _baseline(env, data)
    # one task lost: the exact test's smallest p-value is 0.5, so the gate is set at 0.6
    worse = studio(env, "eval", "compare", baseline, RUN_ID, "--gate", "--alpha", "0.6")
    assert worse.returncode == 1, worse.stdout + worse.stderr
    assert "GATE FAILED: pass rate dropped" in worse.stdout
    assert "100.0% (95% CI " in worse.stdout  # the baseline's rate with its interval
    # without --gate the comparison is only shown; with the default significance one lost
    # task of eleven is not a significant drop
    assert studio(env, "eval", "compare", baseline, RUN_ID, "--alpha", "0.6").returncode == 0
    assert studio(env, "eval", "compare", baseline, RUN_ID, "--gate").returncode == 0
    unknown = studio(env, "eval", "compare", "<nope>", RUN_ID, "--gate")
    assert unknown.returncode == 2 and "unknown_eval_run" in unknown.stderr
    assert json.loads(studio(env, "eval", "show", baseline, "--format", "json").stdout)["cells"]
