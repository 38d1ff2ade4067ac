"""The studio pages in headless Chromium against a live ``studio api`` on PostgreSQL that sends
each execution to a real ``studio worker`` (Celery on the Redis broker), with a git host and the
GitHub API stand-in, so runs are cloned, pushed and get their pull request.

Each test drives a page as a person would and checks what it shows; every page visited is
screenshotted (``test-artifacts/screenshots``) and checked with axe-core (no serious or critical
violation).
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import Select

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
from tests.integration.api.server import ApiServer, running_api
from tests.integration.celery_fixtures import claimed_broker
from tests.integration.databases import create_migrated_pg_database, drop_pg_database
from tests.support import warm_cli
from tests.support.redaction import settings_redactor

FAILING_TEST = "echo 'FAILED test_widgets: expected 3, got 2'; echo 'AssertionError' >&2; exit 1"


@pytest.fixture(scope="module")
def studio(tmp_path_factory: pytest.TempPathFactory, pg_admin: str) -> Iterator[ApiServer]:
    url = create_migrated_pg_database(pg_admin)
    try:
        with claimed_broker() as broker, running_api(
                tmp_path_factory.mktemp("studio-pages"), github=True, database_url=url,
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
    """Screenshot the page and check it with axe-core."""
    screenshot(driver, name)
    assert serious_violations(driver) == [], name


def _command(script: str) -> dict[str, Any]:
    return {"tool_calls": [{"tool": "command.run",
                            "args": {"argv": ["sh", "-c", script], "timeout_s": 60}}]}


def fix_script() -> dict[str, Any]:
    """A test that fails, the fix, the test passing, the answer."""
    return {"turns": [
        {"tool_calls": [{"tool": "workspace.write_file",
                         "args": {"path": "widgets.py", "content": "COUNT = 2\n"}}]},
        _command(FAILING_TEST),
        {"tool_calls": [{"tool": "workspace.write_file",
                         "args": {"path": "widgets.py", "content": "COUNT = 3\n"}}]},
        _command("echo '1 passed'"),
        {"final": {"status": "success", "summary": "Fixed the widget count."}},
    ]}


def sleeper_script(steps: int = 30) -> dict[str, Any]:
    return {"turns": [*[_command("sleep 1") for _ in range(steps)], {"final": "slept"}]}


def _calls(driver: WebDriver) -> list[tuple[str, str]]:
    return [(d.find_element(By.CLASS_NAME, "tool").text,
             d.find_element(By.CLASS_NAME, "outcome").text)
            for d in driver.find_elements(By.CSS_SELECTOR, "#conversation details.call")]


def test_a_run_page_shows_the_failing_test_the_fix_the_diff_and_the_links(
    studio: ApiServer, browser: WebDriver
) -> None:
    execution_id = create(studio, fix_script(), pull_request=True)
    login(browser, studio.url, studio.admin, f"#/runs/{execution_id}")
    wait(browser).until(lambda d: text(d, "run-status") == "succeeded")
    assert text(browser, "stream-state") == "ended"
    assert _calls(browser) == [("workspace.write_file", "ok"), ("command.run", "exit 1 · failed"),
                               ("workspace.write_file", "ok"), ("command.run", "exit 0")]
    failed = browser.find_elements(By.CSS_SELECTOR, "#conversation details.call")[1]
    assert "failed" in str(failed.get_attribute("class"))
    failed.find_element(By.TAG_NAME, "summary").click()
    assert "FAILED test_widgets" in failed.find_element(By.CLASS_NAME, "stdout").text
    assert "AssertionError" in failed.find_element(By.CLASS_NAME, "stderr").text
    assert failed.find_element(By.CLASS_NAME, "exit-code").text == "exit code 1"
    assert "Fixed the widget count." in text(browser, "conversation")

    row = wait_final(studio, execution_id)
    wait(browser).until(lambda d: "+COUNT = 3" in text(d, "diff"))
    assert "widgets.py" in text(browser, "diff")
    assert text(browser, "run-branch") == row["branch"] and row["branch"].startswith("studio/")
    assert text(browser, "run-commit") == row["head_sha"]
    pr = browser.find_element(By.ID, "pr-link")
    assert row["pr_url"] and pr.get_attribute("href") == row["pr_url"]
    steps = [e.get_attribute("data-step")
             for e in browser.find_elements(By.CSS_SELECTOR, "#conversation .finalize")]
    assert steps == ["commit", "push", "pull_request"]
    assert text(browser, "run-cost").startswith("$")
    # the workspace's own disk use, as text (issue 35): a clone through the mirror cache
    wait(browser).until(lambda d: "history borrowed from the mirror" in text(d, "run-disk"))
    assert re.fullmatch(r"[\d.]+ MB \(checkout [\d.]+ MB\), history borrowed from the mirror",
                        text(browser, "run-disk"))
    _checked(browser, "run-page-finished")

    go(browser, studio.url, "#/runs")
    wait(browser).until(lambda d: d.find_elements(By.CSS_SELECTOR, f'tr[data-id="{execution_id}"]'))
    _checked(browser, "runs-list")


def test_the_token_stays_out_of_urls_local_storage_and_html(
    studio: ApiServer, browser: WebDriver
) -> None:
    token = studio.token("pages-reader", ["read"])
    login(browser, studio.url, token)
    wait(browser).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#executions"))
    for page in ("#/runs", "#/flowcharts", "#/new"):
        go(browser, studio.url, page)
        assert token not in browser.current_url
        assert token not in browser.page_source
        assert browser.execute_script("return window.localStorage.length") == 0
    assert browser.execute_script("return sessionStorage.getItem('studio.api.token')") == token
    with studio.client() as client:
        policy = client.get("/").headers["content-security-policy"]
    assert policy.startswith("default-src 'self'; script-src 'self';")
    assert "unsafe-inline" not in policy and "unsafe-eval" not in policy


def _confirm(driver: WebDriver) -> None:
    wait(driver).until(lambda d: d.find_element(By.ID, "confirm-dialog").is_displayed())
    driver.find_element(By.ID, "confirm-yes").click()


def test_cancel_from_the_page_stops_a_running_execution(
    studio: ApiServer, browser: WebDriver
) -> None:
    execution_id = create(studio, sleeper_script())
    login(browser, studio.url, studio.admin, f"#/runs/{execution_id}")
    wait(browser).until(lambda d: ("command.run", "exit 0") in _calls(d))
    assert text(browser, "run-status") == "running"
    browser.find_element(By.ID, "cancel-run").click()
    _checked(browser, "run-page-cancel-confirmation")
    browser.find_element(By.ID, "confirm-no").click()  # asked, and declined: nothing happens
    assert text(browser, "run-message") == ""
    browser.find_element(By.ID, "cancel-run").click()
    _confirm(browser)
    wait(browser).until(lambda d: text(d, "run-status") == "cancelled")
    row = wait_final(studio, execution_id)
    assert row["status"] == "cancelled" and row["cancel_requested"] is True
    assert len(_calls(browser)) < 30
    screenshot(browser, "run-page-cancelled")


def _downloaded(folder: Path) -> Path:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = [p for p in folder.glob("replay-*.json")]
        if found:
            return found[0]
        time.sleep(0.1)
    raise AssertionError("no replay script was downloaded")


def test_the_downloaded_replay_script_reruns_to_the_same_result(
    studio: ApiServer, browser: WebDriver, tmp_path: Path
) -> None:
    execution_id = create(studio, fix_script(), pull_request=False)
    first = wait_final(studio, execution_id)
    login(browser, studio.url, studio.admin, f"#/runs/{execution_id}")
    wait(browser).until(lambda d: text(d, "stream-state") == "ended")
    browser.find_element(By.ID, "download-replay").click()
    script = _downloaded(tmp_path / "downloads")

    again = warm_cli.run(
        [sys.executable, "-m", "services.cli", "run", "the same again", "--repo",
         studio.repo_url, "--provider", "replay", "--script", str(script), "--no-pr", "--json"],
        capture_output=True, text=True, env=studio.env, timeout=300, check=False)
    assert again.returncode == 0, again.stderr
    second = json.loads(again.stdout.strip().splitlines()[-1])
    with studio.client(studio.admin) as client:
        calls = [client.get(f"/api/executions/{i}/tool-calls").json()["tool_calls"]
                 for i in (execution_id, second["execution_id"])]
    shape = [[(c["domain"], c["operation"], c["args"], c["ok"],
               (c["envelope"].get("result") or {}).get("exit_code")) for c in run]
             for run in calls]
    assert shape[0] == shape[1] and len(shape[0]) == 4
    assert second["execution_status"] == first["status"] == "succeeded"
    assert second["result"] == first["result"]


def hostile_script() -> dict[str, Any]:
    """Every field the pages show carries the payloads: file name and content (so the diff),
    command output, an error message, model text, the answer."""
    return {"turns": [
        {"tool_calls": [{"tool": "workspace.write_file",
                         "args": {"path": f"x{HOSTILE}.txt".replace("/", "_"),
                                  "content": HOSTILE + "\n"}}]},
        {"tool_calls": [{"tool": "command.run",
                         "args": {"argv": ["sh", "-c", 'echo "$0"; echo "$0" >&2; exit 2',
                                           HOSTILE], "timeout_s": 60}}]},
        {"tool_calls": [{"tool": "workspace.read_file",
                         "args": {"path": f"missing{HOSTILE}".replace("/", "_")}}]},
        {"final": {"status": "success", "summary": HOSTILE, "changes": [HOSTILE]}},
    ]}


def hostile_flowchart() -> dict[str, Any]:
    return {"nodes": [
        {"id": "start", "type": "start", "name": HOSTILE, "config": {}},
        {"id": "route", "type": "decision", "name": HOSTILE, "config": {"field": "status"}},
        {"id": "end", "type": "end", "name": HOSTILE, "config": {}},
    ], "edges": [
        {"id": "e0", "source": "start", "target": "route"},
        {"id": "e1", "source": "route", "target": "end", "condition": HOSTILE},
    ]}


def test_hostile_text_from_a_run_is_shown_as_text_on_every_page(
    studio: ApiServer, browser: WebDriver
) -> None:
    execution_id = create(studio, hostile_script(), prompt=HOSTILE)
    wait_final(studio, execution_id)
    with studio.client(studio.admin) as client:
        made = client.post("/api/flowcharts", json={"name": HOSTILE, "description": HOSTILE,
                                                    "graph": hostile_flowchart()})
    assert made.status_code == 201, made.text
    flowchart_id = made.json()["id"]

    login(browser, studio.url, studio.admin, f"#/runs/{execution_id}")
    wait(browser).until(lambda d: text(d, "stream-state") == "ended")
    wait(browser).until(lambda d: HOSTILE in text(d, "diff"))
    for details in browser.find_elements(By.CSS_SELECTOR, "#conversation details.call"):
        details.find_element(By.TAG_NAME, "summary").click()
    shown = text(browser, "view")
    assert shown.count(HOSTILE) >= 5  # prompt, file name, output, error, answer, diff
    assert nothing_injected_ran(browser)
    _checked(browser, "hostile-run-page")
    for page in ("#/runs", f"#/flowcharts/{flowchart_id}", "#/flowcharts", "#/operators"):
        go(browser, studio.url, page)
        time.sleep(1.5)  # the page has loaded and drawn what it shows
        assert nothing_injected_ran(browser), page
    with studio.client(studio.admin) as client:
        started = client.post(f"/api/flowcharts/{flowchart_id}/runs", json={"inputs": {}})
    assert started.status_code == 202, started.text
    go(browser, studio.url, f"#/flowchart-runs/{started.json()['id']}")
    wait(browser).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#flowchart-graph g.node"))
    assert nothing_injected_ran(browser)
    screenshot(browser, "hostile-flowchart-run")
    go(browser, studio.url, f"#/flowcharts/{flowchart_id}")
    wait(browser).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#flowchart-graph g.node"))
    labels = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#flowchart-graph text")]
    assert labels.count(HOSTILE) == 4  # three node names and one edge condition
    assert text(browser, "flowchart-name") == HOSTILE
    assert nothing_injected_ran(browser)
    screenshot(browser, "hostile-flowchart")
    _hostile_dead_letter(studio, browser)


def _hostile_dead_letter(studio: ApiServer, browser: WebDriver) -> None:
    """The operators page's dead-letter queue shows an execution's last error as text."""
    from sqlalchemy import update

    from services.db.models import NodeExecution
    from services.db.session import Database, create_db_engine
    from tests.integration.db.helpers import new_execution

    db = Database(create_db_engine(studio.db_url))
    try:
        dead = new_execution(db)
        error = {"attempt": 1, "code": "provider_unavailable", "message": HOSTILE, "at": "now"}
        with db.session() as session:
            session.execute(update(NodeExecution).where(NodeExecution.id == dead).values(
                status="dead_lettered", last_error=error, attempt_errors=[error]))
    finally:
        db.dispose()
    go(browser, studio.url, "#/operators")
    wait(browser).until(lambda d: HOSTILE in text(d, "dead-letters"))
    assert nothing_injected_ran(browser)
    with studio.client(studio.admin) as client:  # out of the queue for the other tests
        assert client.post(f"/api/executions/{dead}/discard").status_code == 200


def _states(driver: WebDriver) -> dict[str, str]:
    return {str(g.get_attribute("data-node-id")): str(g.get_attribute("data-state"))
            for g in driver.find_elements(By.CSS_SELECTOR, "#flowchart-graph g.node")}


def test_a_flowchart_graph_renders_and_its_node_states_change_during_a_run(
    studio: ApiServer, browser: WebDriver
) -> None:
    slow_fix = {"turns": [_command("sleep 3"),
                          {"final": {"status": "success", "summary": "fixed"}}]}
    agent = {"provider": "replay", "prompt": "Fix it.", "replay_script": slow_fix}
    graph = {"nodes": [
        {"id": "start", "type": "start", "config": {}},
        {"id": "fix", "type": "agent", "name": "Fix the tests", "config": agent},
        {"id": "route", "type": "decision", "config": {"field": "status"}},
        {"id": "ship", "type": "command", "config": {"command": "echo shipped"}},
        {"id": "retry", "type": "command", "config": {"command": "echo retry"}},
        {"id": "end", "type": "end", "config": {}},
    ], "edges": [
        {"id": "e0", "source": "start", "target": "fix"},
        {"id": "e1", "source": "fix", "target": "route"},
        {"id": "e2", "source": "route", "target": "ship", "condition": "success"},
        {"id": "e3", "source": "route", "target": "retry", "condition": "partial"},
        {"id": "e4", "source": "ship", "target": "end"},
        {"id": "e5", "source": "retry", "target": "end"},
    ]}
    with studio.client(studio.admin) as client:
        made = client.post("/api/flowcharts", json={"name": "fix and ship", "graph": graph})
    assert made.status_code == 201, made.text
    login(browser, studio.url, studio.admin, "#/flowcharts")
    wait(browser).until(lambda d: d.find_elements(By.LINK_TEXT, "fix and ship"))
    _checked(browser, "flowcharts-list")
    browser.find_element(By.LINK_TEXT, "fix and ship").click()
    wait(browser).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#flowchart-graph g.node"))
                        == 6)
    assert len(browser.find_elements(By.CSS_SELECTOR, "#flowchart-graph g.edge")) == 6
    conditions = {e.text for e in browser.find_elements(By.CSS_SELECTOR,
                                                        "#flowchart-graph text.condition")}
    assert conditions == {"success", "partial"}
    types = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#flowchart-graph text.type")]
    assert "agent" in types and "decision" in types
    _checked(browser, "flowchart-graph")

    browser.find_element(By.ID, "flowchart-inputs").clear()
    browser.find_element(By.ID, "flowchart-inputs").send_keys('{"ticket": "W-1"}')
    browser.find_element(By.ID, "flowchart-start").click()
    wait(browser).until(lambda d: _states(d).get("fix") == "running")
    seen_running = _states(browser)
    _checked(browser, "flowchart-run-live")
    wait(browser).until(lambda d: text(d, "flowchart-run-status") == "succeeded")
    final = _states(browser)
    assert seen_running["ship"] in ("", "pending") and final["ship"] == "succeeded"
    assert final["fix"] == "succeeded" and final["retry"] == "skipped"
    screenshot(browser, "flowchart-run-finished")
    browser.find_element(By.CSS_SELECTOR, 'a.node-link[data-node-id="fix"]').click()
    wait(browser).until(lambda d: text(d, "run-status") == "succeeded")
    # the status comes from the execution's row, the conversation from its event stream
    wait(browser).until(lambda d: "sleep 3" in text(d, "conversation"))


def _setting_row(driver: WebDriver, key: str) -> dict[str, str]:
    row = driver.find_element(By.CSS_SELECTOR, f'#settings tr[data-key="{key}"]')
    return {"value": row.find_element(By.CLASS_NAME, "value").text,
            "source": row.find_element(By.CLASS_NAME, "source").text}


def test_the_operator_page_flips_the_cutover_and_the_kill_switch_pauses_a_run(
    studio: ApiServer, browser: WebDriver
) -> None:
    paid = {"turns": [{"final": "done", "usage": {"input_tokens": 1000, "output_tokens": 50,
                                                  "cost_usd": 0.05}}]}
    assert wait_final(studio, create(studio, paid))["cost_usd"] == pytest.approx(0.05)
    login(browser, studio.url, studio.admin, "#/operators")
    key = "agent_runtime_cutover_enabled"
    try:
        wait(browser).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#settings tr"))
        assert _setting_row(browser, key) == {"value": "true", "source": "default"}
        assert browser.find_elements(By.CSS_SELECTOR, "#provider-matrix article")
        spend = [r.text for r in browser.find_elements(By.CSS_SELECTOR, "#spend tr")]
        assert len(spend) == 1 and studio.repo_url in spend[0]
        assert "$0.0500" in spend[0] and "$20.0000" in spend[0]
        _checked(browser, "operators")
        Select(browser.find_element(By.ID, f"setting-{key}")).select_by_value("false")
        browser.find_element(By.ID, f"save-{key}").click()
        wait(browser).until(lambda d: _setting_row(d, key) == {"value": "false",
                                                               "source": "runtime_setting"})
        refused = wait_final(studio, create(studio, fix_script()))
        assert refused["settings_snapshot"][key] == {"value": False, "source": "runtime_setting"}
        assert refused["status"] == "failed" and refused["error_code"] == "unsupported_capability"
        Select(browser.find_element(By.ID, f"setting-{key}")).select_by_value("true")
        browser.find_element(By.ID, f"save-{key}").click()
        wait(browser).until(lambda d: _setting_row(d, key)["value"] == "true")

        # 20 distinct steps: below max_iterations (24) and never a loop, so that the resumed
        # run can finish
        running = create(studio, {"turns": [*[_command(f"sleep 1; echo step {n}")
                                              for n in range(20)], {"final": "slept"}]})
        with studio.client(studio.admin) as client:
            wait(browser).until(lambda d: client.get(
                f"/api/executions/{running}/tool-calls").json()["tool_calls"])
        browser.find_element(By.ID, "killswitch-toggle").click()
        _confirm(browser)
        wait(browser).until(lambda d: "ENGAGED" in text(d, "killswitch-state"))
        with studio.client(studio.admin) as client:  # paused, not failed: queued again
            wait(browser, 120).until(lambda d: client.get(
                f"/api/executions/{running}").json()["paused_reason"] == "killswitch")
            assert client.get(f"/api/executions/{running}").json()["status"] == "queued"
        for page in ("#/runs", "#/flowcharts", "#/new"):  # its state is shown on every page
            go(browser, studio.url, page)
            assert "ENGAGED" in text(browser, "killswitch-state")
        go(browser, studio.url, f"#/runs/{running}")
        wait(browser).until(lambda d: text(d, "run-status") == "paused (kill switch)")
        screenshot(browser, "killswitch-engaged")
        go(browser, studio.url, "#/operators")
        wait(browser).until(lambda d: d.find_elements(By.ID, "killswitch-toggle"))
        browser.find_element(By.ID, "killswitch-toggle").click()
        _confirm(browser)
        wait(browser).until(lambda d: text(d, "killswitch-state") == "released")
        resumed = wait_final(studio, running, timeout=300)  # released: it resumes and ends
        assert resumed["status"] == "succeeded", (resumed["error_code"], resumed["error_message"])
        assert resumed["paused_reason"] is None
    finally:
        with studio.client(studio.admin) as client:
            client.put("/api/killswitch", json={"engaged": False})
            client.put(f"/api/settings/{key}", json={"value": True})


def test_the_new_run_form_starts_a_run(studio: ApiServer, browser: WebDriver) -> None:
    login(browser, studio.url, studio.admin, "#/new")
    wait(browser).until(lambda d: d.find_elements(By.ID, "new-run-form"))
    _checked(browser, "new-run-form")
    browser.find_element(By.ID, "run-repo-url").send_keys(studio.repo_url)
    browser.find_element(By.ID, "run-prompt-input").send_keys("Fix the widget count")
    browser.find_element(By.ID, "run-max-iterations").send_keys("12")
    browser.find_element(By.ID, "run-script").send_keys(json.dumps(fix_script()))
    browser.find_element(By.ID, "run-submit").click()
    wait(browser).until(lambda d: text(d, "run-status") == "succeeded")
    execution_id = text(browser, "run-id")
    with studio.client(studio.admin) as client:
        row = client.get(f"/api/executions/{execution_id}").json()
    assert row["prompt"] == "Fix the widget count" and row["limits"]["max_iterations"] == 12
    assert row["pr_url"] is None  # the form's PR box was left unticked


def gated_script(name: str) -> dict[str, Any]:
    """A command the policy gates (its argv holds hostile text), then the answer."""
    return {"turns": [
        {"tool_calls": [{"tool": "command.run", "args": {
            "argv": ["sh", "-c", f"echo ran > {name}.txt", HOSTILE], "timeout_s": 60}}]},
        {"final": {"status": "success", "summary": f"{name} done"}},
    ]}


def _approval(driver: WebDriver, status: str) -> str | None:
    """The text of the one approval when it has ``status`` (read at once: the panel may be
    drawn again between two reads)."""
    try:
        found = driver.find_elements(By.CSS_SELECTOR, "#approvals-list .approval")
        if len(found) == 1 and found[0].get_attribute("data-status") == status:
            return str(found[0].text) or None
    except StaleElementReferenceException:
        return None
    return None


def _act(driver: WebDriver, selector: str, action: Any) -> bool:
    """Do ``action`` on the element found by ``selector`` in the pending approval."""
    try:
        action(driver.find_element(By.CSS_SELECTOR, "#approvals-list .approval " + selector))
        return True
    except (StaleElementReferenceException, NoSuchElementException):
        return False


def test_pending_approvals_are_decided_from_the_run_page(
    studio: ApiServer, browser: WebDriver
) -> None:
    policy = {"command.run": "require"}
    denied = create(studio, gated_script("denied"), approval_policy=policy)
    login(browser, studio.url, studio.token("pages-reviewer", ["read", "approve"]),
          f"#/runs/{denied}")
    wait(browser).until(lambda d: text(d, "run-status") == "awaiting_approval")
    pending = wait(browser).until(lambda d: _approval(d, "pending"))
    # the call, its arguments (JSON, so quotes are escaped) as text
    assert "command.run" in pending and "<script>window.__studio_xss" in pending
    _checked(browser, "run-page-pending-approval")
    wait(browser).until(lambda d: _act(d, ".approval-reason", lambda e: e.send_keys(HOSTILE)))
    time.sleep(2.5)  # a refresh of the run (every 2 s) keeps what was typed
    wait(browser).until(lambda d: _act(d, ".deny", lambda e: e.click()))
    wait(browser).until(lambda d: text(d, "run-status") == "succeeded")
    decided = wait(browser).until(lambda d: _approval(d, "denied"))
    assert "denied by pages-reviewer" in decided and HOSTILE in decided
    assert f"by pages-reviewer: {HOSTILE}" in text(browser, "conversation")
    assert "error permission_denied" in [o for _, o in _calls(browser)]
    assert nothing_injected_ran(browser)
    _checked(browser, "run-page-denied-approval")

    approved = create(studio, gated_script("approved"), approval_policy=policy)
    go(browser, studio.url, f"#/runs/{approved}")
    wait(browser).until(lambda d: _approval(d, "pending"))
    wait(browser).until(lambda d: _act(d, ".approve", lambda e: e.click()))
    wait(browser).until(lambda d: text(d, "run-status") == "succeeded")
    assert _calls(browser) == [("command.run", "exit 0")]
    with studio.client(studio.admin) as client:
        approvals = client.get(f"/api/executions/{approved}/approvals").json()["approvals"]
    assert [(a["status"], a["decided_by"]) for a in approvals] == [
        ("approved", "pages-reviewer")]


def test_a_model_fallback_is_shown_on_the_run_page_as_text(
    studio: ApiServer, browser: WebDriver
) -> None:
    """The journal's ``model_fallback`` event (which provider and model took over from which,
    and why) is a line of the conversation; its fields are shown as text."""
    from services.db.journal import DbEventSink
    from services.db.session import Database, create_db_engine
    from services.execution.ports import AgentEvent, AgentEventKind

    execution_id = create(studio, fix_script())
    wait_final(studio, execution_id)
    db = Database(create_db_engine(studio.db_url))
    try:
        DbEventSink(db, settings_redactor()).emit(AgentEvent(AgentEventKind.MODEL_FALLBACK,
                                                             execution_id, 2, {
            "from": {"provider": "codex", "model": HOSTILE},
            "to": {"provider": "gemini", "model": "gemini-2.5-pro"},
            "reason": {"code": "provider_unavailable", "message": HOSTILE},
            "position": 1}))
    finally:
        db.dispose()
    login(browser, studio.url, studio.admin, f"#/runs/{execution_id}")
    wait(browser).until(lambda d: text(d, "stream-state") == "ended")
    notes = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#conversation .fallback")]
    assert notes == [f"model fallback: codex ({HOSTILE}) → gemini (gemini-2.5-pro) after "
                     f"provider_unavailable: {HOSTILE}"]
    assert nothing_injected_ran(browser)
    screenshot(browser, "run-page-model-fallback")


def test_compactions_and_cached_tokens_are_shown_on_the_run_page_as_text(
    studio: ApiServer, browser: WebDriver
) -> None:
    """Each ``compaction`` event (ours, and Claude Code's own) is a line of the conversation;
    the tokens line names the cached input; hostile values are shown as text."""
    from services.db.journal import DbEventSink
    from services.db.session import Database, create_db_engine
    from services.execution.ports import AgentEvent, AgentEventKind

    execution_id = create(studio, fix_script())
    wait_final(studio, execution_id)
    db = Database(create_db_engine(studio.db_url))
    try:
        sink = DbEventSink(db, settings_redactor())
        for data in ({"elided": ["c1"], "replaced": 4, "summary": HOSTILE, "before_tokens": 13000,
                      "after_tokens": 7900, "window": 16000},
                     {"source": "claude_code", "trigger": HOSTILE, "before_tokens": 150000}):
            sink.emit(AgentEvent(AgentEventKind.COMPACTION, execution_id, 2, data))
    finally:
        db.dispose()
    login(browser, studio.url, studio.admin, f"#/runs/{execution_id}")
    wait(browser).until(lambda d: text(d, "stream-state") == "ended")
    notes = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#conversation .compaction")]
    assert notes == [
        "context compacted: 13000 → 7900 tokens of a 16000-token window, 1 old outputs "
        "summarized, 4 messages replaced by a summary",
        f"context compacted by Claude Code ({HOSTILE}, 150000 tokens before)"]
    assert re.fullmatch(r"\d+ in \(0 cached\) / \d+ out", text(browser, "run-tokens"))
    assert nothing_injected_ran(browser)
