"""Which deliveries start a review (pure): ``pull_request`` opened, pushed to or reopened when
the trigger has review on, and ``/studio review`` comments whatever the setting; hostile and
unexpected payloads start nothing. And how a pending review gives way in the slot."""

from __future__ import annotations

from typing import Any

import pytest

from services.triggers.events import FOLLOW_UP, IGNORED, QUEUED, REVIEW, TriggerRule, classify
from services.triggers.feedback import end_comment_wanted
from services.triggers.slots import merge
from tests.support import webhooks

REPO = "acme/widgets"
ON = TriggerRule(command="/studio", review=True)
OFF = TriggerRule(command="/studio", review=False)


@pytest.mark.parametrize("action", ["opened", "synchronize", "reopened"])
def test_a_pull_request_opened_pushed_or_reopened_is_a_review_when_review_is_on(
        action: str) -> None:
    payload = webhooks.pull_request(REPO, 12, action, "alice")
    found = classify("pull_request", payload, ON)
    assert found.outcome == QUEUED and found.number == 12 and found.sender == "alice"
    assert found.work == {"kind": REVIEW, "number": 12,
                          "react": {"target": "issue", "id": 12}}
    off = classify("pull_request", payload, OFF)  # the setting is what decides
    assert off.outcome == IGNORED and off.work is None
    assert "review is off" in off.detail


def _without(payload: dict[str, Any], *path: str) -> dict[str, Any]:
    node = payload
    for key in path[:-1]:
        node = node[key]
    del node[path[-1]]
    return payload


@pytest.mark.parametrize(("payload", "why"), [
    (webhooks.pull_request(REPO, 12, "closed", "alice"), "starts nothing"),
    (webhooks.pull_request(REPO, 12, "labeled", "alice"), "starts nothing"),
    (webhooks.pull_request(REPO, 12, "edited", "alice"), "starts nothing"),
    (webhooks.pull_request(REPO, 12, "opened", "alice", head_repo="mallory/widgets"), "fork"),
    (_without(webhooks.pull_request(REPO, 12, "opened", "alice"), "pull_request", "head",
              "repo"), "fork"),  # a deleted fork: GitHub sends no head repository
    ({**webhooks.pull_request(REPO, 12, "opened", "alice"), "pull_request": None},
     "no pull request number"),
    (_without(webhooks.pull_request(REPO, 12, "opened", "alice"), "pull_request", "number"),
     "no pull request number"),
    ({**webhooks.pull_request(REPO, 12, "opened", "alice"),
      "pull_request": {"number": "12", "head": {"repo": {"full_name": REPO}}}},
     "no pull request number"),
    ({**webhooks.pull_request(REPO, 12, "opened", "alice"),
      "pull_request": {"number": True, "head": {"repo": {"full_name": REPO}}}},
     "no pull request number"),
    ({**webhooks.pull_request(REPO, 12, "opened", "alice"),
      "pull_request": {"number": 12, "head": {"repo": {"full_name": ["acme/widgets"]}}}},
     "fork"),
    (_without(webhooks.pull_request(REPO, 12, "opened", "alice"), "action"), "starts nothing"),
    ({**webhooks.pull_request(REPO, 12, "opened", "alice"), "action": ["opened"]},
     "starts nothing"),
    (_without(webhooks.pull_request(REPO, 12, "opened", "alice"), "sender"), "no repository"),
    (_without(webhooks.pull_request(REPO, 12, "opened", "alice"), "repository"),
     "no repository"),
])
def test_hostile_or_unexpected_pull_request_payloads_start_nothing(payload: Any,
                                                                   why: str) -> None:
    found = classify("pull_request", payload, ON)
    assert found.outcome == IGNORED and found.work is None
    assert why in found.detail


@pytest.mark.parametrize("payload", [[], "opened", 3, None, {"action": "opened"}])
def test_a_pull_request_body_of_the_wrong_shape_starts_nothing(payload: Any) -> None:
    assert classify("pull_request", payload, ON).outcome == IGNORED


@pytest.mark.parametrize("rule", [ON, OFF])
def test_a_review_command_on_a_pull_request_is_a_review_whatever_the_setting(
        rule: TriggerRule) -> None:
    for text in ("/studio review", "  /studio review\n", "/studio review please, use gpt-9",
                 "/studio review --provider=evil"):
        found = classify("issue_comment", webhooks.pr_comment(REPO, 9, text, "bob", 77), rule)
        assert found.outcome == QUEUED, text
        # the comment's text goes nowhere: no comments, no provider, no model
        assert found.work == {"kind": REVIEW, "number": 9,
                              "react": {"target": "comment", "id": 77}}, text
    review = classify("pull_request_review_comment",
                      webhooks.review_comment(REPO, 9, "/studio review", "bob", "a.py", 3), rule)
    assert review.work is not None and review.work["kind"] == REVIEW
    # positive control: the same command with other words is still a follow-up
    for text in ("/studio reviews", "/studio please review", "/studio Review it",
                 "/studioreview"):
        found = classify("issue_comment", webhooks.pr_comment(REPO, 9, text, "bob"), rule)
        assert found.work is None or found.work["kind"] == FOLLOW_UP, text
    issue = webhooks.pr_comment(REPO, 9, "/studio review", "bob")
    del issue["issue"]["pull_request"]  # a comment on an issue: nothing to review
    assert classify("issue_comment", issue, rule).outcome == IGNORED


def test_a_pending_review_gives_way_to_other_work_and_joins_it_without_changing_it() -> None:
    review = {"kind": REVIEW, "number": 9, "deliveries": ["d1"]}
    follow = {"kind": FOLLOW_UP, "number": 9, "comments": [{"text": "fix"}],
              "deliveries": ["d2"]}
    assert merge(review, follow)["kind"] == FOLLOW_UP
    assert merge(review, follow)["comments"] == [{"text": "fix"}]
    assert merge(follow, review)["kind"] == FOLLOW_UP
    assert merge(review, follow)["deliveries"] == merge(follow, review)["deliveries"][::-1]
    twice = merge(review, {**review, "deliveries": ["d3"]})
    assert twice["kind"] == REVIEW and twice["deliveries"] == ["d1", "d3"]


def test_a_succeeded_review_gets_no_end_comment_and_any_other_ending_does() -> None:
    assert not end_comment_wanted(REVIEW, "succeeded")
    assert end_comment_wanted(REVIEW, "failed") and end_comment_wanted(REVIEW, "cancelled")
    assert end_comment_wanted(FOLLOW_UP, "succeeded")  # other work: as before
