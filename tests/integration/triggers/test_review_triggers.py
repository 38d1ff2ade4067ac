"""Reviews started by the GitHub triggers, end to end: the real ``studio api`` takes signed
deliveries, a real ``studio worker`` (Redis broker, SQLite) acts on them through the per-PR slot and
runs the review executions (replay provider, the trigger's script), which post on the GitHub
double (pull-request files, reviews and review comments, rejecting out-of-diff lines)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from services.db.models import NodeExecution
from services.db.status import FINAL_STATUSES
from services.db.triggers import IDLE
from tests.integration.celery_fixtures import claimed_broker
from tests.integration.triggers.world import (
    REPO,
    SLOW_REPO,
    World,
    trigger_world,
    wait_for,
)
from tests.support import webhooks

pytestmark = pytest.mark.slow

OWNER = "maintainer"  # write permission
READER = "reader"
BUGGY = "def mean(values):\n    return sum(values) / (len(values) - 1)\n"
FINDING = {"path": "stats.py", "line": 2, "severity": "major", "title": "mean() divides by n - 1",
           "body": "The mean of [2, 4] is 3, this gives 6."}
REVIEW_SCRIPT = {"turns": [{"final": json.dumps({
    "summary": "Reviewed the change.", "verdict": "request_changes", "findings": [FINDING]})}]}
SETTLED = ("started", "coalesced", "ignored", "refused", "failed", "deferred")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """SQLite only: the slot's transitions on PostgreSQL are the triggers suite's (a second
    database here would add a minute for nothing the slot does differently per kind)."""
    root = tmp_path_factory.mktemp("review-triggers")
    with claimed_broker() as broker, trigger_world(root, f"sqlite:///{root / 'studio.db'}",
                                                   broker) as built:
        built.issues.permissions.update({OWNER: "maintain", READER: "read"})
        yield built


def _reviews_of(world: World, number: int) -> list[NodeExecution]:
    return [row for row in world.executions()
            if ((row.request or {}).get("review") or {}).get("pr") == number]


def _settled(world: World, deliveries: list[str]) -> list[str]:
    """Waits until each delivery was acted on; answers their outcomes."""
    def outcomes() -> list[str] | None:
        found = [world.delivery(d).outcome for d in deliveries]
        return found if all(o in SETTLED for o in found) else None
    return wait_for("the deliveries to be acted on", outcomes, 60, world.logs)


def _quiet(world: World, number: int) -> list[NodeExecution]:
    """Waits until the pull request's slot is idle and its reviews are final; answers them."""
    wait_for("the pull request's slot to be idle", lambda: world.slot_state(REPO, number) == IDLE
             and all(r.status in FINAL_STATUSES for r in _reviews_of(world, number)),
             240, world.logs)
    return _reviews_of(world, number)


def _markers(world: World, number: int) -> list[str]:
    return [c["body"].rsplit("<!--", 1)[-1] for c in world.github.reviews.comments_of(number)]


def _deliver(world: World, event: str, payload: dict[str, Any]) -> str:
    answer = world.deliver(event, payload)
    assert answer.status_code == 202, answer.text
    assert answer.json()["outcome"] == "queued", answer.text
    return str(answer.json()["delivery"])


def test_pull_request_events_and_the_review_command_start_reviews_through_the_slot(
        world: World) -> None:
    world.put_trigger(REPO, review=True, replay_script=REVIEW_SCRIPT)
    branch = "feature-mean"
    world.commit_files(REPO, branch, {"stats.py": BUGGY})
    number = world.github.add_pull("acme", "widgets", branch, "main", title="Add mean").number

    # opened: one review, with its inline comment on the planted bug's line
    opened = _deliver(world, "pull_request",
                      webhooks.pull_request(REPO, number, "opened", OWNER, branch=branch))
    assert _settled(world, [opened]) == ["started"], world.delivery(opened).detail
    [first] = _quiet(world, number)
    assert first.status == "succeeded", (first.error_code, first.error_message, world.logs())
    assert first.id == world.delivery(opened).execution_id
    assert len(world.github.reviews.of(number)) == 1
    [comment] = world.github.reviews.comments_of(number)
    assert (comment["path"], comment["line"]) == ("stats.py", 2)
    assert ("issues", number, "eyes") in world.issues.reactions  # the start reaction
    # the review is the feedback: no start or end comment on the pull request
    assert world.issues.comments_on(number, "studio-feedback") == []

    # a push storm: three synchronize deliveries in quick succession -> at most two reviews
    storm = []
    for push in range(3):
        world.commit_files(REPO, branch, {"stats.py": BUGGY + f"# push {push}\n"})
        storm.append(world.deliver("pull_request", webhooks.pull_request(
            REPO, number, "synchronize", OWNER, branch=branch)))
    assert all(a.status_code == 202 for a in storm), [a.text for a in storm]
    outcomes = _settled(world, [a.json()["delivery"] for a in storm])
    assert sorted(outcomes) == ["coalesced", "coalesced", "started"], outcomes
    reviews = _quiet(world, number)
    assert 2 <= len(reviews) <= 3, [r.id for r in reviews]  # the storm: one or two reviews
    assert all(r.status == "succeeded" for r in reviews), [r.error_message for r in reviews]
    later = [r for r in reviews if r.id != first.id]
    assert all((r.request or {})["review"].get("since_sha") for r in later)  # incremental
    assert len(world.github.reviews.of(number)) == len(reviews)
    markers = _markers(world, number)
    assert len(markers) == len(set(markers)) == 1, markers  # updated, never duplicated

    # /studio review with review off: a review (not a follow-up), the branch unchanged
    world.put_trigger(REPO, review=False, replay_script=REVIEW_SCRIPT)
    head = world.branch_log(branch)
    ignored = world.deliver("pull_request", webhooks.pull_request(
        REPO, number, "synchronize", OWNER, branch=branch))
    assert ignored.json()["outcome"] == "ignored"  # positive control: the setting is off
    command = _deliver(world, "issue_comment",
                       webhooks.pr_comment(REPO, number, "/studio review", OWNER, 9001))
    assert _settled(world, [command]) == ["started"], world.delivery(command).detail
    after = _quiet(world, number)
    [asked] = [r for r in after if r.id not in {x.id for x in reviews}]
    assert asked.id == world.delivery(command).execution_id
    assert asked.status == "succeeded", (asked.error_code, asked.error_message)
    assert not [r for r in world.executions() if (r.request or {}).get("follow_up_branch")]
    assert world.branch_log(branch) == head  # no commit pushed
    assert len(world.github.reviews.of(number)) == len(after)
    assert len(_markers(world, number)) == 1
    assert ("issues/comments", 9001, "eyes") in world.issues.reactions
    assert world.issues.comments_on(number, "studio-feedback") == []


def test_a_review_asked_on_a_fork_or_by_a_reader_is_refused(world: World) -> None:
    world.commit_files(REPO, "from-fork", {"stats.py": BUGGY})
    number = world.github.add_pull("acme", "widgets", "from-fork", "main").number
    world.issues.forks[number] = world.host.url(REPO)
    command = _deliver(world, "issue_comment",
                       webhooks.pr_comment(REPO, number, "/studio review", OWNER, 9002))
    reader = _deliver(world, "issue_comment",
                      webhooks.pr_comment(REPO, number, "/studio review", READER, 9003))
    assert _settled(world, [command, reader]) == ["refused", "refused"]
    assert "fork" in (world.delivery(command).detail or "")
    assert "'read' permission" in (world.delivery(reader).detail or "")
    assert _reviews_of(world, number) == [] and world.github.reviews.of(number) == []
    refusals = world.issues.comments_on(number, "studio-feedback: refusal")
    assert len(refusals) == 2 and "fork" in refusals[0].body + refusals[1].body


def test_the_review_setting_through_the_admin_api_and_the_cli(world: World) -> None:
    body = {"repo_url": world.host.url(SLOW_REPO), "provider": "codex"}
    with world.api.client(world.api.admin) as client:
        for bad in ("yes", 1, None, {"on": True}, ["true"]):
            answer = client.put(f"/api/triggers/{SLOW_REPO}", json={**body, "review": bad})
            assert answer.status_code == 422, (bad, answer.text)
            assert answer.json()["error"]["code"] == "invalid_arguments"
        stored = client.put(f"/api/triggers/{SLOW_REPO}", json=body)  # positive control
        assert stored.status_code == 200 and stored.json()["review"] is False  # off by default
        on = client.put(f"/api/triggers/{SLOW_REPO}", json={**body, "review": True})
        assert on.json()["review"] is True
        listed = client.get("/api/triggers").json()["triggers"]
        assert {t["repository"]: t["review"] for t in listed}[SLOW_REPO] is True
    done = world.studio("triggers", "set", SLOW_REPO, "--repo-url", world.host.url(SLOW_REPO),
                        "--provider", "codex", "--no-review")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["review"] is False
    done = world.studio("triggers", "set", SLOW_REPO, "--repo-url", world.host.url(SLOW_REPO),
                        "--provider", "codex", "--review")
    assert done.returncode == 0 and json.loads(done.stdout)["review"] is True
