"""The run page shows the setup phase (each command, its streamed output, its end, the network
summary and the refusals) as text, in headless Chromium: markup in a setup command or its
output stays text."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from tests.integration.api.browser import artifacts
from tests.integration.api.helpers import create, wait_final
from tests.integration.api.server import ApiServer
from tests.integration.api.test_viewer_browser import CHROMEDRIVER, CHROMIUM, FLAGS

MARKUP = '<b id="injected">bold</b>'


@pytest.fixture
def chromium(tmp_path: Path) -> Iterator[WebDriver]:
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*FLAGS, f"--user-data-dir={tmp_path / 'profile'}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    try:
        yield driver
    finally:
        driver.quit()


def test_the_run_page_shows_the_setup_phase_as_text(api: ApiServer, chromium: WebDriver) -> None:
    probe = ("python3 -c \"import urllib.request as u; u.urlopen('https://evil.example/')\" "
             f"|| echo '{MARKUP}'")
    script = {"turns": [{"tool_calls": [{"tool": "workspace.write_file",
                                         "args": {"path": "n.txt", "content": "x\n"}}]},
                        {"final": "done"}]}
    execution_id = create(api, script, setup=[f"echo '{MARKUP}'", probe])
    assert wait_final(api, execution_id)["status"] == "succeeded", api.log[-20:]
    wait = WebDriverWait(chromium, 60, poll_frequency=0.1)
    chromium.get(api.url + "/")
    chromium.find_element(By.ID, "token-input").send_keys(api.token("viewer", ["read"]))
    chromium.find_element(By.ID, "token-save").click()
    link = f'#executions tr[data-id="{execution_id}"] a'
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, link))
    chromium.find_element(By.CSS_SELECTOR, link).click()
    wait.until(lambda d: d.find_element(By.ID, "stream-state").text == "ended")
    notes = [e.text for e in chromium.find_elements(By.CSS_SELECTOR, "p.note.setup")]
    assert notes == [f"setup 1 (request): $ echo '{MARKUP}'",
                     "setup 1 (request): succeeded, exit 0",
                     f"setup 2 (request): $ {probe}", "setup 2 (request): succeeded, exit 0"]
    output = [e.text for e in chromium.find_elements(By.CSS_SELECTOR, "pre.setup-output")]
    assert output.count(MARKUP) == 2
    network = [e.text for e in chromium.find_elements(By.CSS_SELECTOR, "p.note.network")]
    assert network[0].startswith("network (setup): 0 bytes in, 1 refused")
    assert network[1].startswith("refused CONNECT evil.example:443 (host not on the allowlist)")
    assert chromium.find_elements(By.ID, "injected") == []
    chromium.save_screenshot(str(artifacts() / "run-page-setup.png"))
