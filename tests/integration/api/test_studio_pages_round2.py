"""The studio pages' second round (issue 36) in headless Chromium against a live ``studio api``
on PostgreSQL with a real ``studio worker`` (the fixture of ``test_studio_pages``): each defect
the issue names, with hostile values wherever a value is shown, and the new views (durations,
timeline, truncation notice and download, filters and search, node detail, reconnecting, 404
and refused-token states, no horizontal overflow at 390 px). Every page state visited is
checked with axe-core and screenshotted."""

from __future__ import annotations

import json
import shlex
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from tests.integration.api.browser import (
    HOSTILE,
    chromium,
    fresh_processes,  # noqa: F401 - autouse: exec'ed fresh
    go,
    login,
    nothing_injected_ran,
    screenshot,
    serious_violations,
    text,
    wait,
)
from tests.integration.api.helpers import create, wait_final
from tests.integration.api.server import ApiServer, api_process, running_api
from tests.integration.api.test_studio_pages import _calls, _command, _confirm, fix_script
from tests.integration.celery_fixtures import claimed_broker
from tests.integration.databases import create_migrated_pg_database, drop_pg_database
from tests.support import warm_cli

UNKNOWN = "0b3e4a57-8c1d-4e0f-9a2b-3c4d5e6f7a8b"


@pytest.fixture(scope="module")
def studio(tmp_path_factory: pytest.TempPathFactory, pg_admin: str) -> Iterator[ApiServer]:
    url = create_migrated_pg_database(pg_admin)
    try:
        with claimed_broker() as broker, running_api(
                tmp_path_factory.mktemp("studio-pages-2"), github=True, database_url=url,
                broker=broker) as server:
            yield server
    finally:
        drop_pg_database(pg_admin, url)


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[WebDriver]:
    (tmp_path / "downloads").mkdir()
    with chromium(tmp_path / "profile", tmp_path / "downloads") as driver:
        yield driver


def _checked(driver: WebDriver, name: str) -> None:
    screenshot(driver, name)
    assert serious_violations(driver) == [], name


def _fits(driver: WebDriver) -> bool:
    """No horizontal overflow: the document is no wider than the window."""
    return bool(driver.execute_script(
        "return document.documentElement.scrollWidth <= window.innerWidth"))


def _wide(driver: WebDriver) -> list[str]:
    """What sticks out on the right (for the failure message)."""
    return list(driver.execute_script(
        "return [...document.querySelectorAll('body *')].filter((e) => "
        "e.getBoundingClientRect().right > window.innerWidth + 0.5).slice(-6).map((e) => "
        "e.tagName + '#' + e.id + '.' + e.className + ' ' + "
        "Math.round(e.getBoundingClientRect().right))"))


def _links(driver: WebDriver, element_id: str) -> list[str]:
    return [str(a.get_attribute("href"))
            for a in driver.find_elements(By.CSS_SELECTOR, f"#{element_id} a")]


# -- defect 1: operator settings ------------------------------------------------------------

def _setting(driver: WebDriver, key: str) -> tuple[str, str]:
    row = driver.find_element(By.CSS_SELECTOR, f'#settings tr[data-key="{key}"]')
    return (row.find_element(By.CLASS_NAME, "value").text,
            row.find_element(By.CLASS_NAME, "source").text)


def _type(driver: WebDriver, key: str, value: str) -> None:
    field = driver.find_element(By.ID, f"setting-{key}")
    field.clear()
    field.send_keys(value)
    driver.find_element(By.ID, f"save-{key}").click()


def test_settings_out_of_range_are_refused_saved_ones_say_so_and_reset(
    studio: ApiServer, browser: WebDriver
) -> None:
    key = "max_iterations"
    login(browser, studio.url, studio.admin, "#/operators")
    try:
        wait(browser).until(lambda d: d.find_elements(By.ID, f"setting-{key}"))
        field = browser.find_element(By.ID, f"setting-{key}")
        assert (field.get_attribute("min"), field.get_attribute("max"),
                field.get_attribute("step")) == ("1", "10000", "1")
        assert "≥ 1, ≤ 10000 model calls" in text(browser, f"bounds-{key}")
        _type(browser, key, "1.5")
        wait(browser).until(lambda d: "max_iterations expects a int, got 1.5" in
                            text(d, "operators-message"))
        assert "error" in str(browser.find_element(By.ID, "operators-message")
                              .get_attribute("class"))
        assert _setting(browser, key) == ("24", "default")
        _type(browser, key, "-5")
        wait(browser).until(lambda d: "at least 1" in text(d, "operators-message"))
        _type(browser, key, "0")
        wait(browser).until(lambda d: "got 0" in text(d, "operators-message"))
        with studio.client(studio.admin) as client:
            assert client.get(f"/api/settings/{key}").json()["value"] == 24
        _checked(browser, "operators-refused")
        _type(browser, key, "30")
        wait(browser).until(lambda d: _setting(d, key) == ("30", "runtime_setting"))
        time.sleep(1)  # the message outlives the redraw
        assert text(browser, "operators-message") == "max_iterations saved: 30."
        browser.find_element(By.ID, f"reset-{key}").click()
        wait(browser).until(lambda d: _setting(d, key) == ("24", "default"))
        assert "reset to its default: 24" in text(browser, "operators-message")
        _checked(browser, "operators-reset")
    finally:
        with studio.client(studio.admin) as client:
            client.delete(f"/api/settings/{key}")


# -- defects 2 and 9: links to what exists, a failed run's reason, the answer once ----------

def failing_script() -> dict[str, Any]:
    return {"turns": [
        {"tool_calls": [{"tool": "workspace.write_file",
                         "args": {"path": "half.txt", "content": "half\n"}}]},
        {"final": {"status": "failed", "summary": f"could not fix it {HOSTILE}"}},
    ]}


def test_a_failed_run_says_why_at_the_top_and_links_nothing_that_does_not_exist(
    studio: ApiServer, browser: WebDriver, tmp_path: Path
) -> None:
    failed = create(studio, failing_script(), pull_request=True)
    row = wait_final(studio, failed)
    assert row["status"] == "failed"
    login(browser, studio.url, studio.admin, f"#/runs/{failed}")
    wait(browser).until(lambda d: text(d, "stream-state") == "ended")
    wait(browser).until(lambda d: "could not fix it" in text(d, "run-error"))
    assert HOSTILE in text(browser, "run-error")
    # a git endpoint is not a web page, and nothing was pushed: text, never a link
    assert _links(browser, "run-repo") == [] and _links(browser, "run-branch") == []
    assert _links(browser, "run-commit") == []
    answers = browser.find_elements(By.CSS_SELECTOR, "#conversation .answer")
    assert len(answers) == 1 and text(browser, "conversation").count("could not fix it") == 1
    assert '"status"' not in text(browser, "conversation")  # no raw JSON answer
    assert nothing_injected_ran(browser)
    _checked(browser, "run-page-failed-reason")

    script = tmp_path / "local.json"
    script.write_text(json.dumps({"turns": [{"final": "done"}]}), encoding="utf-8")
    local = warm_cli.run(
        [sys.executable, "-m", "services.cli", "run", "local one", "--repo",
         str(studio.bare_repo), "--provider", "replay", "--script", str(script), "--no-pr",
         "--json"], capture_output=True, text=True, env=studio.env, timeout=300, check=False)
    assert local.returncode == 0, local.stderr
    local_id = json.loads(local.stdout.strip().splitlines()[-1])["execution_id"]
    go(browser, studio.url, f"#/runs/{local_id}")
    wait(browser).until(lambda d: text(d, "stream-state") == "ended")
    assert text(browser, "run-repo") == str(studio.bare_repo)
    assert _links(browser, "run-repo") == [] and _links(browser, "run-branch") == []


# -- defect 3: output cut, said, downloadable, searchable -----------------------------------

def test_a_cut_output_says_where_and_how_much_and_can_be_downloaded_and_searched(
    studio: ApiServer, browser: WebDriver, tmp_path: Path
) -> None:
    script = {"turns": [
        {"tool_calls": [{"tool": "command.run", "args": {
            "argv": ["sh", "-c", 'echo "$0"; seq 100000 116000', HOSTILE], "timeout_s": 60}}]},
        {"final": "done"}]}
    execution_id = create(studio, script)
    wait_final(studio, execution_id)
    with studio.client(studio.admin) as client:
        call = client.get(f"/api/executions/{execution_id}/tool-calls").json()["tool_calls"][0]
        result = call["envelope"]["result"]
        raw = client.get(f"/api/executions/{execution_id}/output",
                         params={"call_id": call["call_id"], "stream": "stdout"})
        assert client.get(f"/api/executions/{execution_id}/output").status_code == 404
    assert result["truncated"] is True and result["output_bytes"]["stdout"] > 100_000
    assert raw.status_code == 200 and raw.text == result["stdout"]
    assert raw.headers["content-type"].startswith("text/plain")

    login(browser, studio.url, studio.admin, f"#/runs/{execution_id}")
    wait(browser).until(lambda d: text(d, "stream-state") == "ended")
    details = browser.find_element(By.CSS_SELECTOR, "#conversation details.call")
    details.find_element(By.TAG_NAME, "summary").click()
    notice = details.find_element(By.CSS_SELECTOR, 'p.cut[data-stream="stdout"]').text
    assert f"{result['output_bytes']['stdout']:,} bytes" in notice
    assert "Showing the last" in notice and "from the start of a line" in notice
    shown = details.find_element(By.CSS_SELECTOR, "pre.stdout").text
    assert shown.splitlines()[0].isdigit() and len(shown.splitlines()[0]) == 6
    assert shown.rstrip().endswith("116000") and HOSTILE not in shown
    search = details.find_element(By.CSS_SELECTOR, 'input.output-search[data-stream="stdout"]')
    search.send_keys("studio_xss")
    wait(browser).until(lambda d: details.find_elements(By.CSS_SELECTOR, "ol.matches li"))
    matches = details.find_elements(By.CSS_SELECTOR, "ol.matches li")
    assert [m.text for m in matches] == [HOSTILE]
    assert nothing_injected_ran(browser)
    _checked(browser, "run-page-cut-output")
    details.find_element(By.CSS_SELECTOR, 'button.download-output[data-stream="stdout"]').click()
    target = tmp_path / "downloads" / f"stdout-{execution_id}.txt"
    wait(browser).until(lambda d: target.exists() and target.stat().st_size > 0)
    time.sleep(0.5)
    assert target.read_text(encoding="utf-8") == result["stdout"]


# -- defect 4 and the node detail, cancel and retry -----------------------------------------

def _flowchart(studio: ApiServer, name: str, command: str) -> str:
    graph = {"nodes": [{"id": "start", "type": "start", "config": {}},
                       {"id": "cmd", "type": "command", "config": {"command": command}},
                       {"id": "end", "type": "end", "config": {}}],
             "edges": [{"id": "a", "source": "start", "target": "cmd"},
                       {"id": "b", "source": "cmd", "target": "end"}]}
    with studio.client(studio.admin) as client:
        made = client.post("/api/flowcharts", json={"name": name, "graph": graph})
    assert made.status_code == 201, made.text
    return str(made.json()["id"])


def _start(studio: ApiServer, flowchart_id: str, inputs: dict[str, Any]) -> str:
    with studio.client(studio.admin) as client:
        started = client.post(f"/api/flowcharts/{flowchart_id}/runs", json={"inputs": inputs})
    assert started.status_code == 202, started.text
    return str(started.json()["id"])


def test_a_command_node_shows_its_output_and_a_run_can_be_retried_and_cancelled(
    studio: ApiServer, browser: WebDriver
) -> None:
    marker = "node-output-marker"
    flowchart_id = _flowchart(studio, "echo node",
                              f"printf '%s\\n' {marker} {shlex.quote(HOSTILE)}")
    run_id = _start(studio, flowchart_id, {"ticket": HOSTILE})
    login(browser, studio.url, studio.admin, f"#/flowchart-runs/{run_id}")
    wait(browser).until(lambda d: text(d, "flowchart-run-status") == "succeeded")
    browser.find_element(By.CSS_SELECTOR, 'button.node-open[data-node-id="cmd"]').click()
    wait(browser).until(lambda d: d.find_elements(By.ID, "node-detail"))
    detail = text(browser, "node-detail")
    assert marker in detail and HOSTILE in detail  # the output, the run's inputs
    assert "exit code 0" in detail
    duration = browser.find_element(By.CSS_SELECTOR, '#flowchart-run-nodes tr[data-node-id="cmd"]'
                                                     ' td.duration').text
    assert duration.endswith(("ms", " s")) and "so far" not in duration
    assert nothing_injected_ran(browser)
    _checked(browser, "flowchart-run-node-detail")
    browser.find_element(By.ID, "node-detail-execution").click()
    wait(browser).until(lambda d: d.find_elements(By.ID, "command-output"))
    assert marker in text(browser, "command-output")
    assert text(browser, "run-provider") == "command"
    _checked(browser, "run-page-command-node")

    go(browser, studio.url, f"#/flowchart-runs/{run_id}")
    wait(browser).until(lambda d: d.find_element(By.ID, "flowchart-run-retry").is_enabled())
    browser.find_element(By.ID, "flowchart-run-retry").click()
    wait(browser).until(lambda d: run_id not in d.execute_script("return location.hash"))
    again = browser.execute_script("return location.hash").split("/")[-1]
    with studio.client(studio.admin) as client:
        assert client.get(f"/api/flowchart-runs/{again}").json()["inputs"] == {"ticket": HOSTILE}

    slow = _start(studio, _flowchart(studio, "sleep node", "sleep 60"), {})
    go(browser, studio.url, f"#/flowchart-runs/{slow}")
    wait(browser).until(lambda d: slow in text(d, "view"))  # this run's page, drawn
    wait(browser).until(lambda d: _node_state(d, "cmd") == "running")
    browser.find_element(By.ID, "flowchart-run-cancel").click()
    _confirm(browser)
    wait(browser).until(lambda d: text(d, "flowchart-run-status") == "cancelled")
    assert not browser.find_element(By.ID, "flowchart-run-cancel").is_enabled()


def _node_state(driver: WebDriver, node: str) -> str:
    found = driver.find_elements(By.CSS_SELECTOR, f'#flowchart-graph g.node[data-node-id="{node}"]')
    return str(found[0].get_attribute("data-state")) if found else ""


# -- defect 5: a lost connection ------------------------------------------------------------

def test_a_lost_connection_shows_reconnecting_and_when_the_page_last_heard(
    studio: ApiServer, browser: WebDriver
) -> None:
    # distinct steps (never a loop), long enough to outlive the test
    execution_id = create(studio, {"turns": [
        *[_command(f"sleep 1; echo step {n}") for n in range(60)], {"final": "slept"}]})
    try:
        with api_process(studio.env, studio.repo_url) as second:  # the same database
            login(browser, second.url, studio.admin, f"#/runs/{execution_id}")
            wait(browser).until(lambda d: ("command.run", "exit 0") in _calls(d))
            assert text(browser, "stream-state") == "live"
            second.process.terminate()
            second.process.wait(30)
            wait(browser).until(lambda d: text(d, "stream-state") == "reconnecting")
            wait(browser).until(lambda d: "last heard from the server at" in
                                text(d, "stream-heard"))
            assert "s ago" in text(browser, "stream-heard")
            _checked(browser, "run-page-reconnecting")
    finally:
        with studio.client(studio.admin) as client:
            client.post(f"/api/executions/{execution_id}/cancel")
        wait_final(studio, execution_id)


# -- defect 6: a run that does not exist, a refused token -----------------------------------

def test_a_missing_run_and_a_refused_token_say_so_once_at_the_top(
    studio: ApiServer, browser: WebDriver
) -> None:
    login(browser, studio.url, studio.admin, f"#/runs/{UNKNOWN}")
    wait(browser).until(lambda d: d.find_element(By.ID, "page-alert").is_displayed())
    assert "Run not found" in text(browser, "page-alert")
    assert not browser.find_elements(By.ID, "cancel-run")
    assert not browser.find_elements(By.ID, "run-cost")
    _checked(browser, "run-page-not-found")
    go(browser, studio.url, f"#/flowchart-runs/{UNKNOWN}")
    wait(browser).until(lambda d: "Flowchart run not found" in text(d, "page-alert"))
    assert not browser.find_elements(By.ID, "flowchart-run-cancel")
    go(browser, studio.url, "#/runs")
    wait(browser).until(lambda d: not d.find_element(By.ID, "page-alert").is_displayed())

    browser.find_element(By.ID, "token-input").send_keys(f"studio_wrong{HOSTILE}")
    browser.find_element(By.ID, "token-save").click()
    wait(browser).until(lambda d: text(d, "token-state") == "token refused")
    assert "refused this token" in text(browser, "page-alert")
    body = str(browser.find_element(By.TAG_NAME, "body").text)
    assert body.count("unauthorized") == 1
    assert not browser.find_elements(By.ID, "executions")
    assert nothing_injected_ran(browser)
    _checked(browser, "token-refused")


# -- defect 7 and the run list: in place, focus kept, one light request; filters, search ----

def test_the_run_list_keeps_focus_filters_searches_pages_and_groups(
    studio: ApiServer, browser: WebDriver
) -> None:
    first = create(studio, fix_script(), prompt=f"Fix the widgets\nsecond line {HOSTILE}")
    failed = create(studio, failing_script(), prompt=HOSTILE)
    for execution_id in (first, failed):
        wait_final(studio, execution_id)
    run_id = _start(studio, _flowchart(studio, "grouped", "echo grouped"), {})
    with studio.client(studio.admin) as client:
        wait(browser).until(lambda _: client.get(f"/api/flowchart-runs/{run_id}")
                            .json()["status"] == "succeeded")
    login(browser, studio.url, studio.admin, "#/runs")
    row = f'#executions tr[data-id="{first}"]'
    wait(browser).until(lambda d: d.find_elements(By.CSS_SELECTOR, row))
    assert browser.find_element(By.CSS_SELECTOR, row + " a.run-title").text == "Fix the widgets"
    assert browser.find_element(By.CSS_SELECTOR, f'#executions tr[data-id="{failed}"] '
                                                 "a.run-title").text == HOSTILE
    took = browser.find_element(By.CSS_SELECTOR, row + " td.col-duration").text
    assert took.endswith((" s", "ms")) and "so far" not in took, took
    assert browser.find_elements(By.CSS_SELECTOR,
                                 f'#executions tr.group[data-flowchart-run="{run_id}"]')
    assert nothing_injected_ran(browser)
    _checked(browser, "runs-list-round2")

    link = browser.find_element(By.CSS_SELECTOR, row + " a.run-title")
    browser.execute_script("arguments[0].focus(); arguments[0].__kept = true;", link)
    loads = int(browser.find_element(By.ID, "executions").get_attribute("data-loads") or 0)
    wait(browser).until(lambda d: int(d.find_element(By.ID, "executions")
                                      .get_attribute("data-loads") or 0) >= loads + 2)
    assert browser.execute_script("return document.activeElement.__kept === true")
    urls = browser.execute_script(
        "return performance.getEntriesByType('resource').map((e) => e.name)"
        ".filter((n) => n.includes('/api/executions?'))")
    assert urls and all("limit=26" in url for url in urls), urls

    search = browser.find_element(By.ID, "runs-search")
    search.send_keys(failed[:8])
    wait(browser).until(lambda d: [r.get_attribute("data-id") for r in d.find_elements(
        By.CSS_SELECTOR, "#executions tr[data-id]")] == [failed])
    search.clear()
    search.send_keys(HOSTILE)
    wait(browser).until(lambda d: "No runs match." in text(d, "list-message"))
    search.clear()
    browser.find_element(By.CSS_SELECTOR, '#runs-status option[value="failed"]').click()
    wait(browser).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#executions tr[data-id]") and
                        all(b.text == "failed" for b in d.find_elements(
                            By.CSS_SELECTOR, "#executions tr[data-id] .badge")))
    browser.find_element(By.CSS_SELECTOR, '#runs-status option[value=""]').click()
    browser.find_element(By.CSS_SELECTOR, '#runs-kind option[value="node"]').click()
    wait(browser).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#executions tr.child") and
                        not d.find_elements(By.CSS_SELECTOR,
                                            f'#executions tr[data-id="{first}"]'))
    _checked(browser, "runs-list-filtered")
    browser.find_element(By.CSS_SELECTOR, '#runs-kind option[value=""]').click()
    with studio.client(studio.admin) as client:
        total = len(client.get("/api/executions?limit=500").json()["executions"])
    if total > 25:
        browser.find_element(By.ID, "runs-next").click()
        wait(browser).until(lambda d: text(d, "runs-page") == "page 2")
        assert not browser.find_elements(By.CSS_SELECTOR, row) or total > 50


# -- the run page's new views: durations, timeline, diff by file ----------------------------

def test_the_run_page_shows_times_a_timeline_and_the_diff_by_file(
    studio: ApiServer, browser: WebDriver
) -> None:
    execution_id = create(studio, fix_script())
    wait_final(studio, execution_id)
    login(browser, studio.url, studio.admin, f"#/runs/{execution_id}")
    wait(browser).until(lambda d: text(d, "stream-state") == "ended")
    wait(browser).until(lambda d: text(d, "run-duration").endswith(" s")
                        or text(d, "run-duration").endswith("ms"))
    for field in ("run-created", "run-started", "run-finished"):
        assert text(browser, field).startswith("20"), field
    durations = [e.text for e in browser.find_elements(By.CSS_SELECTOR,
                                                       "#conversation details.call .duration")]
    assert len(durations) == 4 and all(d.startswith("· ") for d in durations), durations
    kinds = [e.get_attribute("data-kind") for e in browser.find_elements(By.CSS_SELECTOR,
                                                                         "#timeline li")]
    assert kinds.count("tool") == 4 and kinds.count("model") >= 4
    assert text(browser, "conversation").count("Fixed the widget count.") == 1
    wait(browser).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#diff-files li"))
    files = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#diff-files li")]
    assert any("widgets.py" in f and "+1" in f for f in files), files
    numbers = browser.find_elements(By.CSS_SELECTOR, "#diff .add .ln")
    assert numbers and numbers[1].text == "1"
    _checked(browser, "run-page-timeline-diff")


# -- defect 8: no horizontal overflow at 390 px; graph library only where a graph is ---------

def test_no_page_overflows_at_390_px_and_the_graph_library_loads_only_for_graphs(
    studio: ApiServer, browser: WebDriver
) -> None:
    execution_id = create(studio, fix_script())
    wait_final(studio, execution_id)
    flowchart_id = _flowchart(studio, "narrow", "echo narrow")
    run_id = _start(studio, flowchart_id, {})
    login(browser, studio.url, studio.admin, "#/runs")
    wait(browser).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#executions tr"))
    assert browser.execute_script("return window.dagre === undefined")
    assert not browser.find_elements(By.CSS_SELECTOR, 'script[src*="dagre"]')
    go(browser, studio.url, "#/operators")
    wait(browser).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#provider-matrix article"))
    assert _fits(browser), ("operators at 1400 px", _wide(browser))
    browser.set_window_size(390, 844)
    pages = {"#/runs": "#executions tr", "#/new": "#new-run-form",
             "#/operators": "#provider-matrix article", "#/flowcharts": "#flowcharts tr",
             f"#/flowcharts/{flowchart_id}": "#flowchart-graph",
             f"#/flowchart-runs/{run_id}": "#flowchart-graph",
             f"#/runs/{execution_id}": "#diff-files li"}
    for page, ready in pages.items():
        go(browser, studio.url, page)
        wait(browser).until(lambda d, r=ready: d.find_elements(By.CSS_SELECTOR, r))
        time.sleep(0.3)
        assert _fits(browser), (page, _wide(browser))
        _checked(browser, "narrow-" + page.strip("#/").replace("/", "-")[:40])
    assert browser.execute_script("return window.dagre !== undefined")


def test_the_skip_link_moves_to_the_content(studio: ApiServer, browser: WebDriver) -> None:
    login(browser, studio.url, studio.admin, "#/runs")
    browser.refresh()  # the token stays in this tab's session; the focus starts at the top
    wait(browser).until(lambda d: text(d, "token-state") == "token set")
    browser.switch_to.active_element.send_keys("\t")
    focused = browser.switch_to.active_element
    assert focused.get_attribute("id") == "skip-link" and focused.is_displayed()
    focused.send_keys("\n")
    assert browser.switch_to.active_element.get_attribute("id") == "view"
    assert browser.execute_script("return location.hash") == "#/runs"
