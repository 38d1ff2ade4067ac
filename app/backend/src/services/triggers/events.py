"""What a delivery asks for: its event and payload read into a :class:`Classified` (pure).

Only the few fields the worker needs are kept (``work``); the payload is untrusted and read
defensively: a field of the wrong type counts as missing. What starts work, given the
repository's trigger (:class:`TriggerRule`):

* ``issues`` ``labeled`` with the trigger's label, or ``assigned`` to its login: an **issue**
  work item (the issue's title and body become the prompt);
* ``issue_comment`` ``created`` on a pull request, ``pull_request_review_comment`` ``created``
  (with its file and line) and ``pull_request_review`` ``submitted`` whose text starts with the
  trigger's command: a **follow-up** (the comment, without the command, joins the prompt);
  the command followed by the word ``review`` (``/studio review``): a **review** of the pull
  request instead (whatever the trigger's ``review`` setting; the rest of the text is ignored);
* ``pull_request`` ``opened``, ``synchronize`` or ``reopened`` when the trigger has ``review``
  on, on a pull request whose head is in the repository itself (not a fork): a **review**.

Everything else is ``ignored`` (with the reason); ``ping`` is answered.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

QUEUED, IGNORED, PING = "queued", "ignored", "ping"
ISSUE, FOLLOW_UP, REVIEW = "issue", "follow_up", "review"
REVIEW_ACTIONS = ("opened", "synchronize", "reopened")
REVIEW_WORD = "review"
MAX_TEXT = 20_000  # characters of an issue body or comment kept for the prompt


@dataclass(frozen=True)
class TriggerRule:
    """The part of a repository's trigger the classification needs."""

    label: str | None = "studio"
    assignee: str | None = None
    command: str = "/studio"
    review: bool = False


@dataclass(frozen=True)
class Classified:
    outcome: str
    detail: str = ""
    action: str | None = None
    repository: str | None = None
    sender: str | None = None
    number: int | None = None
    work: dict[str, Any] | None = field(default=None)


def _get(data: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def _text(data: Any, *path: str, limit: int = 200) -> str | None:
    value = _get(data, *path)
    return value[:limit] if isinstance(value, str) else None


def _int(data: Any, *path: str) -> int | None:
    value = _get(data, *path)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def repository_of(payload: Any) -> str | None:
    name = _text(payload, "repository", "full_name")
    return name.lower() if name and name.count("/") == 1 else None


def _command_text(body: str | None, command: str) -> str | None:
    """The comment's text after the command, when it starts with it (else ``None``)."""
    if body is None:
        return None
    stripped = body.lstrip()
    if not command or not stripped.startswith(command):
        return None
    rest = stripped[len(command):]
    if rest and not rest[0].isspace():
        return None  # "/studiox" is not "/studio"
    return rest.strip()[:MAX_TEXT]


def classify(event: str, payload: Any, rule: TriggerRule | None) -> Classified:
    """The delivery read: ``queued`` with its work item, ``ignored`` with why, or ``ping``."""
    base: dict[str, Any] = {"action": _text(payload, "action", limit=64),
                            "repository": repository_of(payload),
                            "sender": _text(payload, "sender", "login", limit=100)}
    if event == "ping":
        return Classified(PING, "ping answered", **base)
    if base["repository"] is None or base["sender"] is None:
        return Classified(IGNORED, "no repository or sender in the payload", **base)
    if rule is None:
        return Classified(IGNORED, "no trigger for this repository", **base)
    handler = _HANDLERS.get(event)
    if handler is None:
        return Classified(IGNORED, f"the event {event!r} starts nothing", **base)
    return handler(payload, rule, base)


def _issue(payload: Any, rule: TriggerRule, base: dict[str, Any]) -> Classified:
    number = _int(payload, "issue", "number")
    action = base["action"]
    if number is None:
        return Classified(IGNORED, "no issue number", **base)
    if _get(payload, "issue", "pull_request") is not None:
        return Classified(IGNORED, "a pull request, not an issue", number=number, **base)
    if action == "labeled" and rule.label and _text(payload, "label", "name") == rule.label:
        reason = f"labelled {rule.label!r}"
    elif (action == "assigned" and rule.assignee
          and _text(payload, "assignee", "login") == rule.assignee):
        reason = f"assigned to {rule.assignee!r}"
    else:
        return Classified(IGNORED, f"issues {action!r} matches no trigger", number=number, **base)
    work = {"kind": ISSUE, "number": number,
            "title": _text(payload, "issue", "title", limit=1000) or "",
            "body": _text(payload, "issue", "body", limit=MAX_TEXT) or "",
            "react": {"target": "issue", "id": number}}
    return Classified(QUEUED, reason, number=number, work=work, **base)


def _follow_up(base: dict[str, Any], number: int | None, text: str | None, react: dict[str, Any],
               **where: Any) -> Classified:
    if number is None:
        return Classified(IGNORED, "no pull request number", **base)
    if text is None:
        return Classified(IGNORED, "not a command", number=number, **base)
    if text.split(maxsplit=1)[:1] == [REVIEW_WORD]:
        return Classified(QUEUED, "review command", number=number, work={
            "kind": REVIEW, "number": number, "react": react}, **base)
    comment = {"author": base["sender"], "text": text, **where}
    return Classified(QUEUED, "command", number=number, work={
        "kind": FOLLOW_UP, "number": number, "comments": [comment], "react": react}, **base)


def _issue_comment(payload: Any, rule: TriggerRule, base: dict[str, Any]) -> Classified:
    if base["action"] != "created":
        return Classified(IGNORED, "only new comments start work", **base)
    if _get(payload, "issue", "pull_request") is None:
        return Classified(IGNORED, "a comment on an issue, not on a pull request",
                          number=_int(payload, "issue", "number"), **base)
    text = _command_text(_text(payload, "comment", "body", limit=MAX_TEXT), rule.command)
    return _follow_up(base, _int(payload, "issue", "number"), text,
                      {"target": "comment", "id": _int(payload, "comment", "id")})


def _review_comment(payload: Any, rule: TriggerRule, base: dict[str, Any]) -> Classified:
    if base["action"] != "created":
        return Classified(IGNORED, "only new review comments start work", **base)
    text = _command_text(_text(payload, "comment", "body", limit=MAX_TEXT), rule.command)
    line = _int(payload, "comment", "line") or _int(payload, "comment", "original_line")
    return _follow_up(base, _int(payload, "pull_request", "number"), text,
                      {"target": "review_comment", "id": _int(payload, "comment", "id")},
                      path=_text(payload, "comment", "path", limit=500), line=line)


def _review(payload: Any, rule: TriggerRule, base: dict[str, Any]) -> Classified:
    if base["action"] != "submitted":
        return Classified(IGNORED, "only submitted reviews start work", **base)
    text = _command_text(_text(payload, "review", "body", limit=MAX_TEXT), rule.command)
    number = _int(payload, "pull_request", "number")
    return _follow_up(base, number, text, {"target": "issue", "id": number})


def _pull_request(payload: Any, rule: TriggerRule, base: dict[str, Any]) -> Classified:
    number = _int(payload, "pull_request", "number")
    if number is None:
        return Classified(IGNORED, "no pull request number", **base)
    if base["action"] not in REVIEW_ACTIONS:
        return Classified(IGNORED, f"pull_request {base['action']!r} starts nothing",
                          number=number, **base)
    if not rule.review:
        return Classified(IGNORED, "review is off for this repository", number=number, **base)
    head_repo = _text(payload, "pull_request", "head", "repo", "full_name")
    if head_repo is None or head_repo.lower() != base["repository"]:
        # a fork (or a deleted one): no automatic review; nobody asked, so nothing is said
        return Classified(IGNORED, "a pull request from a fork", number=number, **base)
    return Classified(QUEUED, f"pull request {base['action']}", number=number, work={
        "kind": REVIEW, "number": number, "react": {"target": "issue", "id": number}}, **base)


_HANDLERS = {"issues": _issue, "pull_request": _pull_request, "issue_comment": _issue_comment,
             "pull_request_review_comment": _review_comment, "pull_request_review": _review}
