"""The eval pages and their API against a live ``studio api``: ``GET /api/evals`` and
``/api/evals/{id}`` (the matrix with its intervals, every item; 404, 422 and 401 as for every
route), and ``#/evals/ID`` in headless Chromium showing the matrix, with hostile text from the
data (a model name, test ids) shown as text and never run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from services.db.evals import EvalRepository, Grade, ItemKey
from services.db.session import Database, create_db_engine
from tests.integration.api.browser import (
    HOSTILE,
    chromium,
    fresh_processes,  # noqa: F401 - autouse: exec'ed fresh
    login,
    nothing_injected_ran,
    screenshot,
    serious_violations,
    text,
    wait,
)
from tests.integration.api.server import ApiServer

RUN_ID = "eval-page-run"
CELL = f"codex/{HOSTILE}/-"


@pytest.fixture(scope="module")
def seeded(api: ApiServer) -> ApiServer:
    """An eval run as ``studio eval run`` leaves it: two tasks in one cell, one unresolved."""
    db = Database(create_db_engine(api.db_url))
    try:
        evals = EvalRepository(db)
        evals.create_run("page-suite", "/suites/page", {"matrix": {"cells": [], "repeat": 1}},
                         RUN_ID)
        evals.ensure_items(RUN_ID, [ItemKey("fixed", CELL, 0), ItemKey("broken", CELL, 0)])
        for item in evals.items(RUN_ID):
            if item.key.task_id == "fixed":
                evals.grade(item.id, Grade(True, ["t.T.test_a"], cost_usd=0.25, turns=3))
            else:
                evals.grade(item.id, Grade(False, [], [HOSTILE], cost_usd=0.25, turns=4,
                                           error_code="patch_failed"))
        evals.finish_run(RUN_ID)
    finally:
        db.engine.dispose()
    return api


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[WebDriver]:
    (tmp_path / "downloads").mkdir()
    with chromium(tmp_path / "profile", tmp_path / "downloads") as driver:
        yield driver


def test_the_eval_api_answers_the_matrix_and_refuses_what_it_should(seeded: ApiServer) -> None:
    with seeded.client(seeded.admin) as client:
        listed = client.get("/api/evals").json()["runs"]
        assert [r["id"] for r in listed] == [RUN_ID]
        report = client.get(f"/api/evals/{RUN_ID}").json()
        (cell,) = report["cells"]
        assert (cell["cell"], cell["resolved"], cell["graded"]) == (CELL, 1, 2)
        assert 0 < cell["ci_low"] < 0.5 < cell["ci_high"] < 1
        assert cell["cost_per_resolved"] == 0.5
        broken = next(i for i in report["items"] if i["task_id"] == "broken")
        assert broken["tests_failed"] == [HOSTILE] and broken["error_code"] == "patch_failed"
        missing = client.get("/api/evals/no-such-run")
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
        assert client.get("/api/evals/%3Cscript%3E").status_code == 422
        assert client.get("/api/evals", params={"limit": 0}).status_code == 422
    with seeded.client() as anonymous:
        assert anonymous.get(f"/api/evals/{RUN_ID}").status_code == 401


def test_the_eval_page_shows_the_matrix_as_text(seeded: ApiServer, browser: WebDriver) -> None:
    login(browser, seeded.url, seeded.admin, f"#/evals/{RUN_ID}")
    wait(browser).until(lambda d: d.find_elements(By.ID, "eval-matrix"))
    matrix = text(browser, "eval-matrix")
    assert "50.0%" in matrix and "9.5% – 90.5%" in matrix and "$0.5000" in matrix
    assert HOSTILE.split(">")[0] in matrix  # the model name, as text
    assert HOSTILE.split(">")[0] in text(browser, "eval-items")
    assert nothing_injected_ran(browser)
    screenshot(browser, "eval-page")
    assert serious_violations(browser) == []
    browser.find_element(By.ID, "nav-evals").click()
    wait(browser).until(lambda d: d.find_elements(By.ID, "evals-table"))
    assert RUN_ID in text(browser, "evals-table")
