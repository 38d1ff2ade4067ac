"""Headless Chromium for the page tests (Debian's ``chromium`` driven by ``chromedriver``), and
what those tests check in it: an axe-core run (the vendored, pinned ``tests/support/vendor``
copy), that no injected script ran, screenshots kept under ``test-artifacts/screenshots`` (git
ignored; ``STUDIO_TEST_ARTIFACTS`` moves it)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from tests.support import warm_cli

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--window-size=1400,1000")
ROOT = Path(__file__).resolve().parents[3]
AXE = ROOT / "tests" / "support" / "vendor" / "axe.min.js"
SERIOUS = ("serious", "critical")
# What every hostile payload would do if it ran: set a flag on the page's window.
HOSTILE = ('<script>window.__studio_xss = "script"</script>'
           '<img src=x onerror="window.__studio_xss = \'img\'">')


def artifacts() -> Path:
    base = Path(os.environ.get("STUDIO_TEST_ARTIFACTS", ROOT / "test-artifacts"))
    path = base / "screenshots"
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextmanager
def chromium(profile: Path, downloads: Path) -> Iterator[WebDriver]:
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    options.add_experimental_option("prefs", {
        "download.default_directory": str(downloads), "download.prompt_for_download": False})
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    try:
        driver.execute_cdp_cmd("Page.setDownloadBehavior",
                               {"behavior": "allow", "downloadPath": str(downloads)})
        yield driver
    finally:
        driver.quit()


def wait(driver: WebDriver, seconds: float = 90) -> WebDriverWait[WebDriver]:
    """Waits that retry while the page redraws (an element replaced between find and read)."""
    return WebDriverWait(driver, seconds, poll_frequency=0.1,
                         ignored_exceptions=(StaleElementReferenceException,))


def login(driver: WebDriver, url: str, token: str, hash_path: str = "#/runs") -> None:
    driver.get(url + "/" + hash_path)
    driver.find_element(By.ID, "token-input").send_keys(token)
    driver.find_element(By.ID, "token-save").click()
    wait(driver).until(lambda d: d.find_element(By.ID, "token-state").text == "token set")


def go(driver: WebDriver, url: str, hash_path: str) -> None:
    """Another page of the app in the same tab (the token stays in this tab's session)."""
    driver.execute_script("location.hash = arguments[0]", hash_path)
    wait(driver).until(lambda d: d.execute_script("return location.hash") == hash_path)


def text(driver: WebDriver, element_id: str) -> str:
    return str(driver.find_element(By.ID, element_id).text)


def serious_violations(driver: WebDriver) -> list[dict[str, Any]]:
    """axe-core's violations of impact serious or critical on the current page."""
    driver.execute_script(AXE.read_text(encoding="utf-8"))
    violations: list[dict[str, Any]] = driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "axe.run(document, {resultTypes: ['violations']})"
        ".then((r) => done(r.violations), (e) => done([{id: 'axe-error', impact: 'critical',"
        " description: String(e)}]));")
    return [{"id": v["id"], "impact": v["impact"], "description": v.get("description"),
             "nodes": [n.get("target") for n in v.get("nodes", [])][:5]}
            for v in violations if v.get("impact") in SERIOUS]


def nothing_injected_ran(driver: WebDriver) -> bool:
    """No payload set its flag, and no element a payload would make exists."""
    flag = driver.execute_script("return window.__studio_xss === undefined")
    injected = driver.execute_script(
        "return document.querySelectorAll('main img, main script, main [onerror]').length")
    return bool(flag) and injected == 0


def screenshot(driver: WebDriver, name: str) -> Path:
    path = artifacts() / f"{name}.png"
    driver.save_screenshot(str(path))
    return path


@pytest.fixture(scope="module", autouse=True)
def fresh_processes() -> Iterator[None]:
    """A browser page module that imports this runs its ``studio api`` and worker exec'ed fresh,
    not forked by the warm CLI launcher: with it, a page twice missed a final state under load
    and once in a quiet CI run, cause not found (docs/sphinx/testing.rst, "The warm CLI
    launcher")."""
    with warm_cli.disabled():
        yield
