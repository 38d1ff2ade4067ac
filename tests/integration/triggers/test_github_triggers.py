"""Work that starts on GitHub, end to end: the real ``studio api`` takes signed deliveries, a
real ``studio worker`` (Redis broker) acts on them and runs the executions, on SQLite and on
PostgreSQL; GitHub is the double of ``tests/support`` (pull requests, issues, comments,
reactions, permissions)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest

from services.db.models import NodeExecution
from services.db.status import FINAL_STATUSES
from services.db.triggers import IDLE, DeliveryStore
from tests.integration.celery_fixtures import claimed_broker, processes_running
from tests.integration.databases import create_migrated_pg_database, drop_pg_database
from tests.integration.triggers.world import (
    REPO,
    SECRET,
    SLOW_REPO,
    SLOW_S,
    TOKEN,
    World,
    slow_script,
    trigger_world,
    wait_for,
)
from tests.support import webhooks
from tests.support.exfil_listener import TcpWitness

pytestmark = pytest.mark.slow

OWNER = "maintainer"  # write permission
READER = "reader"


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def world(request: pytest.FixtureRequest,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp(f"triggers-{request.param}")
    admin = url = None
    if request.param == "sqlite":
        url = f"sqlite:///{root / 'studio.db'}"
    else:
        admin = request.getfixturevalue("pg_admin")
        url = create_migrated_pg_database(admin)
    try:
        with claimed_broker() as broker, trigger_world(root, url, broker) as built:
            built.issues.permissions.update({OWNER: "maintain", READER: "read"})
            built.put_trigger(REPO)
            yield built
    finally:
        if admin is not None:
            drop_pg_database(admin, url)


def _number() -> int:
    return 100 + uuid.uuid4().int % 100_000


def _issue_run(world: World, number: int) -> tuple[str, int]:
    """A labelled issue run to its end; its execution and the number of its pull request."""
    answer = world.deliver("issues", webhooks.labeled(REPO, number, "studio", OWNER,
                                                      title="Rename", body="the helper"))
    assert answer.status_code == 202, answer.text
    delivery = answer.json()["delivery"]
    execution_id = wait_for("the issue's execution", lambda: world.delivery(delivery)
                            .execution_id, 60, world.logs)
    row = world.final(execution_id)
    assert row.status == "succeeded", (row.error_code, row.error_message, world.logs())
    assert row.pr_number is not None
    wait_for("the issue's slot to be released",
             lambda: world.slot_state(REPO, number) == IDLE, 60, world.logs)
    return execution_id, row.pr_number


def _trace_reaches_the_execution(world: World, delivery_id: str, execution_id: str) -> None:
    """One trace: the API's delivery span, the worker's processing, the slot's start naming
    the execution, and the execution's own agent span."""
    def found(spans: list[Any]) -> bool:
        names = {s.name for s in spans if s.attributes.get("studio.execution_id")
                 == execution_id}
        return "studio.trigger.start" in names and "invoke_agent studio" in names
    spans = world.traces.wait_for(found, timeout=60)
    ingress = [s for s in spans if s.name == "studio.webhook.delivery"
               and s.attributes.get("studio.delivery_id") == delivery_id]
    process = [s for s in spans if s.name == "studio.webhook.process"
               and s.attributes.get("studio.delivery_id") == delivery_id]
    assert len(process) == 1  # the redelivery was answered, never processed
    trace = process[0].trace_id
    assert trace in {s.trace_id for s in ingress}  # the API's span of that delivery
    start = [s for s in spans if s.name == "studio.trigger.start"
             and s.attributes.get("studio.execution_id") == execution_id]
    agent = [s for s in spans if s.name == "invoke_agent studio"
             and s.attributes.get("studio.execution_id") == execution_id]
    assert [s.trace_id for s in process + start + agent] == [trace] * 3


def test_deliveries_are_authenticated_capped_and_recorded(world: World) -> None:
    payload = webhooks.labeled(REPO, _number(), "studio", OWNER)
    before = len(world.executions())
    for kwargs in ({"signature_value": None}, {"signature_value": "sha256=" + "0" * 64},
                   {"signature_value": webhooks.signature("wrong", b"{}")}):
        delivery_id = str(uuid.uuid4())
        if kwargs["signature_value"] is None:
            answer = webhooks.deliver(world.hook_url, None, "issues", payload,
                                      delivery_id=delivery_id)
        else:
            answer = world.deliver("issues", payload, delivery_id=delivery_id, **kwargs)
        assert answer.status_code == 401, answer.text
        assert world.delivery(delivery_id) is None  # nothing stored
    # a bearer token is no signature: the webhook's only authentication is the secret's
    answer = httpx2.post(world.hook_url, content=json.dumps(payload).encode(), timeout=30,
                         headers={"Authorization": f"Bearer {world.api.admin}",
                                  "X-GitHub-Event": "issues", "X-GitHub-Delivery": "tok-1"})
    assert answer.status_code == 401 and world.delivery("tok-1") is None
    big = json.dumps({**payload, "padding": "x" * (2 * 1024 * 1024)}).encode()
    assert world.deliver("issues", None, body=big).status_code == 413
    malformed_id = str(uuid.uuid4())
    answer = world.deliver("issues", None, body=b'{"action": "labeled",', delivery_id=malformed_id)
    assert answer.status_code == 400
    assert world.delivery(malformed_id).outcome == "malformed"
    ping = world.deliver("ping", {"zen": "Design for failure.", "hook_id": 1})
    assert ping.status_code == 200 and ping.json()["outcome"] == "ping"
    ignored = world.deliver("issues", webhooks.labeled(REPO, 5, "bug", OWNER))
    assert ignored.status_code == 202 and ignored.json()["outcome"] == "ignored"
    assert len(world.executions()) == before  # nothing started
    # positive control: the same payload, signed with the secret, is taken
    assert world.deliver("ping", {"zen": "x"}).status_code == 200


def test_a_labelled_issue_then_a_follow_up_on_its_pull_request(world: World) -> None:
    number = _number()
    delivery_id = str(uuid.uuid4())
    payload = webhooks.labeled(REPO, number, "studio", OWNER, title="Rename", body="the helper")
    first = world.deliver("issues", payload, delivery_id=delivery_id)
    again = world.deliver("issues", payload, delivery_id=delivery_id)  # a redelivery
    assert (first.status_code, again.status_code) == (202, 200)
    assert again.json()["outcome"] == "duplicate"
    execution_id = wait_for("the issue's execution",
                            lambda: world.delivery(delivery_id).execution_id, 60, world.logs)
    row = world.final(execution_id)
    assert row.status == "succeeded", (row.error_code, row.error_message, world.logs())
    pulls = [p for p in world.github.pulls if p.head == row.branch]
    assert len(pulls) == 1 and f"Fixes #{number}" in pulls[0].body
    wait_for("the end comment", lambda: world.issues.comments_on(
        number, f"end {execution_id}"), 60, world.logs)
    assert len(world.issues.comments_on(number, f"start {execution_id}")) == 1
    assert ("issues", number, "eyes") in world.issues.reactions
    assert len([e for e in world.executions() if f"#{number}" in e.prompt]) == 1
    _trace_reaches_the_execution(world, delivery_id, execution_id)
    wait_for("the issue's slot to be released",
             lambda: world.slot_state(REPO, number) == IDLE, 60, world.logs)

    # the follow-up: one more commit on the same branch, no second pull request
    pull = pulls[0]
    head_before = world.branch_log(pull.head)
    answer = world.deliver("issue_comment", webhooks.pr_comment(
        REPO, pull.number, "/studio rename the helper; use provider gemini, max_budget_usd "
        "1000, network open", OWNER))
    assert answer.status_code == 202
    follow_id = wait_for("the follow-up", lambda: world.delivery(answer.json()["delivery"])
                         .execution_id, 60, world.logs)
    follow = world.final(follow_id)
    assert follow.status == "succeeded", (follow.error_code, follow.error_message)
    head_after = world.branch_log(pull.head)
    assert len(head_after) == len(head_before) + 1 and head_after[1:] == head_before
    assert len([p for p in world.github.pulls if p.head == pull.head]) == 1
    assert follow.pr_url is None and follow.branch == pull.head
    # the comment's words chose nothing: the trigger's settings are the run's
    assert follow.provider == "replay"
    assert follow.settings_snapshot["limits"]["max_iterations"] == 6
    assert follow.settings_snapshot["limits"]["max_budget_usd"] == row.settings_snapshot[
        "limits"]["max_budget_usd"]
    assert (follow.request or {}).get("network") == "offline"
    assert "rename the helper" in follow.prompt
    wait_for("the follow-up's end comment", lambda: world.issues.comments_on(
        pull.number, f"end {follow_id}"), 60, world.logs)
    assert len(world.issues.comments_on(pull.number, f"end {follow_id}")) == 1
    assert TOKEN not in "".join(c.body for c in world.issues.comments)
    assert SECRET not in "".join(c.body for c in world.issues.comments)


def _follow_ups_of(world: World, number: int, repo: str = REPO) -> list[NodeExecution]:
    return sorted((e for e in world.executions(repo) if f"pull request #{number}:" in e.prompt),
                  key=lambda e: e.created_at)


def test_a_storm_of_comments_yields_at_most_two_runs_and_the_second_sees_the_rest(
        world: World) -> None:
    world.live_worker()
    number = world.studio_pull()
    texts = [f"/studio step {i} {uuid.uuid4().hex[:6]}" for i in range(5)]
    for i, text in enumerate(texts):
        answer = world.deliver("issue_comment", webhooks.pr_comment(REPO, number, text, OWNER,
                                                                   comment_id=900 + i))
        assert answer.status_code == 202
    wait_for("the storm to settle", lambda: len(_follow_ups_of(world, number)) >= 1
             and all(e.status in FINAL_STATUSES for e in _follow_ups_of(world, number))
             and world.slot_state(REPO, number) == IDLE, 180, world.logs)
    runs = _follow_ups_of(world, number)
    assert 1 <= len(runs) <= 2
    seen = [[t for t in texts if t.removeprefix("/studio ") in run.prompt] for run in runs]
    assert sorted(sum(seen, [])) == sorted(texts)  # every comment reached a run, once
    outcomes = [world.delivery(d.id).outcome for d in DeliveryStore(world.db).recent(200)
                if d.number == number]
    assert outcomes.count("started") == 1 and outcomes.count("coalesced") == 4
    metrics = httpx2.get(f"{world.api.url}/metrics", timeout=30).text
    coalesced = _sample(metrics, 'studio_webhook_deliveries_total{event="issue_comment",'
                                 'outcome="coalesced"}')
    assert coalesced >= 4 and _sample(metrics, "studio_trigger_coalesced_total") == coalesced
    assert _sample(metrics, 'studio_trigger_slots{state="idle"}') >= 1


def _sample(metrics: str, name: str) -> float:
    for line in metrics.splitlines():
        if line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not in /metrics")


def test_who_may_not_trigger_gets_one_refusal_and_nothing_runs(world: World) -> None:
    world.live_worker()
    number = world.studio_pull()
    before = len(world.executions())
    answer = world.deliver("issue_comment", webhooks.pr_comment(REPO, number, "/studio go",
                                                               READER))
    delivery = answer.json()["delivery"]
    wait_for("the refusal", lambda: world.delivery(delivery).outcome == "refused", 60,
             world.logs)
    assert len(world.issues.comments_on(number, f"refusal {delivery}")) == 1
    assert "'read' permission" in world.issues.comments_on(number, "refusal")[0].body

    # a pull request from a fork: refused; the fork's host never hears from the studio
    with TcpWitness() as fork_host:
        fork = world.studio_pull()
        world.issues.forks[fork] = f"{fork_host.url}/forker/widgets.git"
        answer = world.deliver("issue_comment", webhooks.pr_comment(REPO, fork, "/studio go",
                                                                   OWNER))
        delivery = answer.json()["delivery"]
        wait_for("the fork's refusal", lambda: world.delivery(delivery).outcome == "refused",
                 60, world.logs)
        assert "fork" in world.issues.comments_on(fork, f"refusal {delivery}")[0].body
        assert fork_host.received() == b"" and fork_host.connections == 0
    assert len(world.executions()) == before
    # positive control: the same comment by a maintainer on the studio's own PR starts a run
    answer = world.deliver("issue_comment", webhooks.pr_comment(REPO, number, "/studio go",
                                                               OWNER))
    wait_for("the maintainer's run", lambda: world.delivery(answer.json()["delivery"])
             .execution_id, 60, world.logs)


def test_the_kill_switch_defers_deliveries_and_releasing_it_starts_them(world: World) -> None:
    world.live_worker()
    assert world.studio("settings", "set", "killswitch_engaged", "true").returncode == 0
    try:
        number = _number()
        answer = world.deliver("issues", webhooks.labeled(REPO, number, "studio", OWNER))
        assert answer.status_code == 202 and answer.json()["outcome"] == "deferred"
        delivery = answer.json()["delivery"]
        time.sleep(1.5)  # three reaper passes: nothing may start while the switch is on
        assert world.delivery(delivery).outcome == "deferred"
        assert not [e for e in world.executions() if f"#{number}" in e.prompt]
    finally:
        assert world.studio("settings", "set", "killswitch_engaged", "false").returncode == 0
    execution_id = wait_for("the deferred work to start", lambda: world.delivery(delivery)
                            .execution_id, 60, world.logs)
    assert world.final(execution_id).status == "succeeded"


def test_a_worker_killed_mid_run_does_not_wedge_the_pull_request(world: World) -> None:
    world.live_worker()
    nonce = f"0.{uuid.uuid4().int % 10**8:08d}"
    world.put_trigger(SLOW_REPO, replay_script=slow_script(nonce))
    number = world.studio_pull(SLOW_REPO)
    first = world.deliver("issue_comment", webhooks.pr_comment(SLOW_REPO, number,
                                                               "/studio slow", OWNER))
    execution_id = wait_for("the slow follow-up", lambda: world.delivery(
        first.json()["delivery"]).execution_id, 60, world.logs)
    wait_for("the slow command", lambda: processes_running("sleep", str(SLOW_S), nonce), 120,
             world.logs)
    pending = world.deliver("issue_comment", webhooks.pr_comment(SLOW_REPO, number,
                                                                 "/studio and more", OWNER))
    wait_for("the second comment to wait", lambda: world.delivery(
        pending.json()["delivery"]).outcome == "coalesced", 60, world.logs)
    world.put_trigger(SLOW_REPO)  # what starts next is quick
    for worker in world.workers:
        if worker.process.poll() is None:
            worker.kill()
    wait_for("the slow command to die", lambda: not processes_running(
        "sleep", str(SLOW_S), nonce), 60, world.logs)
    world.start_worker("worker-b")
    resumed = world.final(execution_id, timeout=240)
    assert resumed.lease_epoch >= 2  # taken over after the kill
    wait_for("the pending follow-up to start", lambda: len(_follow_ups_of(
        world, number, SLOW_REPO)) == 2, 120, world.logs)
    second = _follow_ups_of(world, number, SLOW_REPO)[1]
    assert "and more" in second.prompt and "/studio slow" not in second.prompt
    assert world.final(second.id).status == "succeeded"
    assert len(world.issues.comments_on(number, f"end {execution_id}")) <= 1
    wait_for("one end comment of the resumed run", lambda: len(world.issues.comments_on(
        number, f"end {execution_id}")) == 1, 60, world.logs)


def test_a_follow_up_whose_branch_moved_is_queued_once_more_at_the_new_head(
        world: World) -> None:
    world.live_worker()
    nonce = f"0.{uuid.uuid4().int % 10**8:08d}"
    script = slow_script(nonce)
    script["turns"][1]["tool_calls"][0]["args"]["argv"] = ["sleep", "4", nonce]
    world.put_trigger(SLOW_REPO, replay_script=script)
    number = world.studio_pull(SLOW_REPO)
    branch = world.pull(number).head
    with world.api.client(world.api.token("runner", ["read", "run"])) as client:
        answer = client.post(f"/api/triggers/{SLOW_REPO}/pulls/{number}/follow-ups",
                             json={"prompt": "tidy the docs"})
    assert answer.status_code == 202, answer.text
    first_id = answer.json()["execution_id"]
    wait_for("the follow-up's command", lambda: processes_running("sleep", "4", nonce), 120,
             world.logs)
    world.put_trigger(SLOW_REPO)  # what starts next is quick
    theirs = world.push_commit(SLOW_REPO, branch, "someone else's change")
    first = world.final(first_id)
    assert (first.status, first.error_code) == ("failed", "branch_moved")
    wait_for("the follow-up queued once more", lambda: len(_follow_ups_of(
        world, number, SLOW_REPO)) == 2, 120, world.logs)
    again = world.final(_follow_ups_of(world, number, SLOW_REPO)[1].id)
    assert again.status == "succeeded", (again.error_code, again.error_message)
    assert "tidy the docs" in again.prompt and again.base_commit == theirs
    log = world.branch_log(branch, SLOW_REPO)
    assert log[1].split()[0] == theirs  # their commit kept, ours on top: never forced
    wait_for("the slot to be idle", lambda: world.slot_state(SLOW_REPO, number) == IDLE, 60,
             world.logs)
    assert len(_follow_ups_of(world, number, SLOW_REPO)) == 2


def test_the_cli_sets_triggers_and_starts_follow_ups(world: World) -> None:
    world.live_worker()
    bad = world.studio("triggers", "set", SLOW_REPO, "--repo-url", world.host.url(SLOW_REPO),
                       "--provider", "codex", "--limit", "max_iterations=0")
    assert bad.returncode == 2 and "max_iterations" in bad.stderr
    bad = world.studio("triggers", "set", SLOW_REPO, "--repo-url", world.host.url(SLOW_REPO),
                       "--provider", "codex", "--label", "<b>x</b>")
    assert bad.returncode == 2
    listed = world.studio("triggers", "list")
    assert listed.returncode == 0 and REPO in listed.stdout
    number = world.studio_pull()
    branch = world.pull(number).head
    done = world.studio("run", "--repo", world.host.url(REPO), "--pr-number", str(number),
                        "add a changelog line")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    assert answer["outcome"] == "started"
    row = world.final(answer["execution_id"])
    assert row.status == "succeeded" and row.branch == branch
    assert len(world.branch_log(branch)) == 2  # the seed commit and the follow-up's


def test_a_follow_up_killed_during_finalization_pushes_once_and_comments_once(
        world: World) -> None:
    """The push has reached the branch when the worker is killed (the host's post-receive hook
    holds the push's answer): the resumed follow-up adopts its own commit, pushes nothing
    more, opens no pull request, and the end comment is posted once."""
    world.live_worker()
    world.put_trigger(SLOW_REPO)
    number = world.studio_pull(SLOW_REPO)
    branch = world.pull(number).head
    flags = world.root / f"hook-{number}"
    flags.mkdir()
    hook = world.host.bare(SLOW_REPO) / "hooks" / "post-receive"
    hook.write_text(f"#!/bin/sh\ntouch {flags}/pushed\n"
                    f"while [ ! -f {flags}/release ]; do sleep 0.1; done\n")
    hook.chmod(0o755)
    try:
        answer = world.deliver("issue_comment", webhooks.pr_comment(SLOW_REPO, number,
                                                                   "/studio finish up", OWNER))
        execution_id = wait_for("the follow-up", lambda: world.delivery(
            answer.json()["delivery"]).execution_id, 60, world.logs)
        wait_for("the push to reach the branch", lambda: (flags / "pushed").exists(), 120,
                 world.logs)
        assert world.execution(execution_id).status == "finalizing"
        for worker in world.workers:
            if worker.process.poll() is None:
                worker.kill()
    finally:
        (flags / "release").touch()
        hook.unlink()
    world.start_worker(f"worker-{uuid.uuid4().hex[:6]}")
    row = world.final(execution_id, timeout=240)
    assert row.status == "succeeded", (row.error_code, row.error_message, world.logs())
    assert row.lease_epoch >= 2 and row.pr_url is None
    assert len(world.host.pushes_of(branch)) == 1  # the killed attempt's push, no other
    assert len(world.branch_log(branch, SLOW_REPO)) == 2
    assert len([p for p in world.github.pulls if p.head == branch]) == 1
    wait_for("the end comment", lambda: world.issues.comments_on(number, f"end {execution_id}"),
             60, world.logs)
    wait_for("the slot to be idle", lambda: world.slot_state(SLOW_REPO, number) == IDLE, 60,
             world.logs)
    assert len(world.issues.comments_on(number, f"end {execution_id}")) == 1
    assert len(world.issues.comments_on(number, f"start {execution_id}")) == 1
