"""The signature check and the classification of deliveries (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from services.triggers.events import FOLLOW_UP, IGNORED, ISSUE, PING, QUEUED, TriggerRule, classify
from services.triggers.signature import sign, verify
from tests.support import webhooks

RULE = TriggerRule(label="studio", assignee="studio-bot", command="/studio")
REPO = "acme/widgets"


def test_a_signature_made_the_way_github_makes_it_verifies_and_any_change_does_not() -> None:
    body = b'{"zen": "Keep it logically awesome."}'
    good = webhooks.signature("s3cret", body)
    assert sign(b"s3cret", body) == good
    assert verify(b"s3cret", body, good)  # positive control
    assert not verify(b"s3cret", body + b" ", good)
    assert not verify(b"other", body, good)
    assert not verify(b"s3cret", body, None)
    assert not verify(b"s3cret", body, good.replace("sha256=", "sha1="))
    assert not verify(None, body, good)  # no secret configured: nothing verifies
    assert not verify(b"s3cret", body, "sha256=" + "0" * 64)


def test_a_labelled_issue_is_issue_work_with_its_title_and_body() -> None:
    found = classify("issues", webhooks.labeled(REPO, 7, "studio", "alice", title="Crash",
                                                body="It crashes"), RULE)
    assert found.outcome == QUEUED and found.number == 7 and found.sender == "alice"
    assert found.work is not None and found.work["kind"] == ISSUE
    assert (found.work["title"], found.work["body"]) == ("Crash", "It crashes")
    other = classify("issues", webhooks.labeled(REPO, 7, "bug", "alice"), RULE)
    assert other.outcome == IGNORED and other.work is None


@pytest.mark.parametrize(("event", "payload", "where"), [
    ("issue_comment", webhooks.pr_comment(REPO, 3, "/studio rename the helper", "bob"), {}),
    ("pull_request_review_comment",
     webhooks.review_comment(REPO, 3, "/studio rename the helper", "bob", "calc.py", 2),
     {"path": "calc.py", "line": 2}),
    ("pull_request_review", webhooks.review(REPO, 3, "/studio rename the helper", "bob"), {}),
])
def test_a_command_in_any_kind_of_comment_is_a_follow_up(event: str, payload: dict[str, Any],
                                                         where: dict[str, Any]) -> None:
    found = classify(event, payload, RULE)
    assert found.outcome == QUEUED and found.work is not None
    assert found.work["kind"] == FOLLOW_UP and found.number == 3
    assert found.work["comments"] == [{"author": "bob", "text": "rename the helper", **where}]


@pytest.mark.parametrize("text", ["rename the helper", "/studiox rename", "please /studio do",
                                  ""])
def test_a_comment_that_does_not_start_with_the_command_is_ignored(text: str) -> None:
    found = classify("issue_comment", webhooks.pr_comment(REPO, 3, text, "bob"), RULE)
    assert found.outcome == IGNORED and found.work is None


@pytest.mark.parametrize("payload", [
    None, [], "text", 5, {"repository": "acme/widgets"}, {"repository": {"full_name": 3}},
    {"repository": {"full_name": "acme/widgets"}, "sender": {"login": ["x"]}},
    {"repository": {"full_name": "acme/widgets"}, "sender": {"login": "x"},
     "issue": {"number": "7"}, "action": "labeled", "label": {"name": "studio"}},
    {"repository": {"full_name": "acme/widgets"}, "sender": {"login": "x"},
     "issue": {"number": True}, "action": "labeled", "label": {"name": "studio"}},
])
def test_hostile_payloads_are_ignored_never_an_error(payload: Any) -> None:
    found = classify("issues", payload, RULE)
    assert found.outcome == IGNORED and found.work is None


def test_ping_unknown_events_and_repositories_without_a_trigger() -> None:
    assert classify("ping", {"zen": "x"}, None).outcome == PING
    assert classify("push", webhooks.labeled(REPO, 1, "studio", "a"), RULE).outcome == IGNORED
    assert classify("issues", webhooks.labeled(REPO, 1, "studio", "a"), None).outcome == IGNORED
