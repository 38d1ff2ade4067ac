"""The operators page's GitHub triggers section in headless Chromium against a live ``studio
api``: a rule, the latest deliveries and the busy slots, shown as text even when a sender's
login or a label is hostile markup (what GitHub users write reaches this page)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium.webdriver.remote.webdriver import WebDriver

from tests.integration.api.browser import (
    HOSTILE,
    chromium,
    fresh_processes,  # noqa: F401 - autouse: exec'ed fresh
    login,
    nothing_injected_ran,
    text,
    wait,
)
from tests.integration.api.server import REPO, ApiServer, running_api
from tests.support import warm_cli, webhooks

SECRET = "whsec-page-test"


@pytest.fixture(scope="module")
def studio(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    with running_api(tmp_path_factory.mktemp("triggers-page"),
                     extra_env={"STUDIO_SECRET_KEY": "page-test-secret-key-0123456789"}) as api:
        done = warm_cli.run([sys.executable, "-m", "services.cli", "integrations", "set",
                             "github", "--webhook-secret-stdin"], input=SECRET + "\n",
                            env=api.env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        yield api


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[WebDriver]:
    (tmp_path / "downloads").mkdir()
    with chromium(tmp_path / "profile", tmp_path / "downloads") as driver:
        yield driver


def test_the_triggers_section_shows_hostile_deliveries_as_text(studio: ApiServer,
                                                                browser: WebDriver) -> None:
    with studio.client(studio.admin) as client:
        answer = client.put(f"/api/triggers/{REPO}", json={
            "repo_url": studio.repo_url, "provider": "codex", "label": "studio", "review": True})
        assert answer.status_code == 200, answer.text
        refused = client.put(f"/api/triggers/{REPO}", json={
            "repo_url": studio.repo_url, "provider": "codex", "label": HOSTILE})
        assert refused.status_code == 422  # a label is one plain word
        refused = client.put(f"/api/triggers/{REPO}", json={
            "repo_url": studio.repo_url, "provider": "codex", "limits": {"max_iterations": -1}})
        assert refused.status_code == 422 and "limits" in refused.text
    hook = f"{studio.url}/api/webhooks/github"
    answer = webhooks.deliver(hook, SECRET, "issues",
                              webhooks.labeled(REPO, 3, "not-studio", HOSTILE))
    assert answer.status_code == 202 and answer.json()["outcome"] == "ignored"
    login(browser, studio.url, studio.admin, "#/operators")
    wait(browser).until(lambda d: d.find_elements("id", "deliveries"))
    shown = text(browser, "deliveries")
    assert HOSTILE in shown and "ignored" in shown  # the markup as text
    assert "codex" in text(browser, "triggers")
    review = browser.find_elements("css selector", "#triggers td[data-label='review']")
    assert [cell.text for cell in review] == ["yes"]
    assert nothing_injected_ran(browser)
