"""The run page in headless Chromium (Debian's ``chromium`` driven by ``chromedriver``).

The execution's second step blocks until the test releases it (a ``command.run`` waiting for a
file in the workspace), so "a tool call appears before the terminal event" is checked without any
race: the page shows the first call with its outcome while the run is provably still running.
Screenshots go to ``test-artifacts/screenshots``.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from tests.integration.api.browser import artifacts
from tests.integration.api.helpers import create, wait_final
from tests.integration.api.server import ApiServer

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--window-size=1400,900")


def gated_script() -> dict[str, Any]:
    wait = "while [ ! -f release ]; do sleep 0.1; done; echo released"
    return {"turns": [
        {"tool_calls": [{"tool": "workspace.write_file",
                         "args": {"path": "notes.txt", "content": "hello\n"}}]},
        {"tool_calls": [{"tool": "command.run",
                         "args": {"argv": ["sh", "-c", wait], "timeout_s": 120}}]},
        {"tool_calls": [{"tool": "workspace.read_file", "args": {"path": "nope.txt"}}]},
        {"final": "done"},
    ]}


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[WebDriver]:
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*FLAGS, f"--user-data-dir={tmp_path / 'profile'}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    try:
        yield driver
    finally:
        driver.quit()


def _rows(driver: WebDriver) -> list[tuple[str, str]]:
    return [(d.find_element(By.CLASS_NAME, "tool").text,
             d.find_element(By.CLASS_NAME, "outcome").text)
            for d in driver.find_elements(By.CSS_SELECTOR, "#conversation details.call")]


def _text(driver: WebDriver, element_id: str) -> str:
    return str(driver.find_element(By.ID, element_id).text)


def test_a_tool_call_appears_live_before_the_terminal_event(
    api: ApiServer, browser: WebDriver
) -> None:
    shots = artifacts()
    execution_id = create(api, gated_script())
    wait = WebDriverWait(browser, 60, poll_frequency=0.1)
    browser.get(api.url + "/")
    browser.find_element(By.ID, "token-input").send_keys(api.token("viewer", ["read"]))
    browser.find_element(By.ID, "token-save").click()
    link = f'#executions tr[data-id="{execution_id}"] a'
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, link))
    browser.find_element(By.CSS_SELECTOR, link).click()

    wait.until(lambda d: ("workspace.write_file", "ok") in _rows(d)
               and ("command.run", "pending") in _rows(d))
    assert _text(browser, "stream-state") == "live"
    assert _text(browser, "run-status") == "running"
    with api.client(api.admin) as client:
        row = client.get(f"/api/executions/{execution_id}").json()
    assert row["status"] == "running" and row["finished_at"] is None
    browser.save_screenshot(str(shots / "viewer-live.png"))

    (Path(row["workspace"]) / "release").write_text("go\n")
    wait.until(lambda d: _text(d, "stream-state") == "ended")
    assert _rows(browser) == [("workspace.write_file", "ok"), ("command.run", "exit 0"),
                              ("workspace.read_file", "error path_not_found")]
    assert wait_final(api, execution_id)["status"] == "succeeded"
    assert _text(browser, "run-status") == "succeeded"
    browser.save_screenshot(str(shots / "viewer-finished.png"))


def test_the_page_asks_for_a_token_and_shows_refusals(api: ApiServer, browser: WebDriver) -> None:
    browser.get(api.url + "/")
    assert _text(browser, "token-state") == "no token"
    browser.find_element(By.ID, "token-input").send_keys("studio_wrong")
    browser.find_element(By.ID, "token-save").click()
    WebDriverWait(browser, 30).until(lambda d: _text(d, "token-state") == "token refused")
    assert "refused this token (unauthorized)" in _text(browser, "page-alert")
    assert _text(browser, "killswitch-state") == "unknown"  # said once, at the top


def test_chromium_is_installed() -> None:
    assert shutil.which("chromium") == CHROMIUM and Path(CHROMEDRIVER).exists()
