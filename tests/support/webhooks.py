"""GitHub's side of a webhook: deliveries signed the way GitHub signs them (``X-Hub-Signature-256``:
``sha256=`` and the hex HMAC-SHA256 of the exact body bytes, keyed with the webhook secret), with
the ``X-GitHub-Event`` and ``X-GitHub-Delivery`` headers, and the payloads of the events the
triggers read (the fields GitHub sends that they use, and a few they do not)."""

from __future__ import annotations

import hashlib
import hmac
import json
import uuid
from typing import Any

import httpx2


def signature(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def deliver(url: str, secret: str | None, event: str, payload: Any, *,
            delivery_id: str | None = None, body: bytes | None = None,
            signature_value: str | None = None) -> httpx2.Response:
    """POST one delivery to ``url`` (the studio's ``/api/webhooks/github``); ``secret`` None
    sends no signature, ``signature_value`` a given one."""
    raw = body if body is not None else json.dumps(payload).encode()
    headers = {"Content-Type": "application/json", "X-GitHub-Event": event,
               "X-GitHub-Delivery": delivery_id or str(uuid.uuid4()),
               "User-Agent": "GitHub-Hookshot/test"}
    if signature_value is not None:
        headers["X-Hub-Signature-256"] = signature_value
    elif secret is not None:
        headers["X-Hub-Signature-256"] = signature(secret, raw)
    return httpx2.post(url, content=raw, headers=headers, timeout=30)


def _repository(full_name: str) -> dict[str, Any]:
    owner = full_name.split("/")[0]
    return {"id": 1, "full_name": full_name, "name": full_name.split("/")[1],
            "owner": {"login": owner}, "private": True}


def labeled(repository: str, number: int, label: str, sender: str, *, title: str = "Fix it",
            body: str = "") -> dict[str, Any]:
    return {"action": "labeled", "label": {"name": label},
            "issue": {"number": number, "title": title, "body": body, "labels": [{"name": label}]},
            "repository": _repository(repository), "sender": {"login": sender}}


def pr_comment(repository: str, number: int, text: str, sender: str,
               comment_id: int = 501) -> dict[str, Any]:
    return {"action": "created",
            "issue": {"number": number, "title": "PR", "pull_request": {"url": "x"}},
            "comment": {"id": comment_id, "body": text, "user": {"login": sender}},
            "repository": _repository(repository), "sender": {"login": sender}}


def review_comment(repository: str, number: int, text: str, sender: str, path: str,
                   line: int, comment_id: int = 601) -> dict[str, Any]:
    return {"action": "created", "pull_request": {"number": number},
            "comment": {"id": comment_id, "body": text, "path": path, "line": line,
                        "user": {"login": sender}},
            "repository": _repository(repository), "sender": {"login": sender}}


def review(repository: str, number: int, text: str, sender: str) -> dict[str, Any]:
    return {"action": "submitted", "pull_request": {"number": number},
            "review": {"id": 77, "body": text, "state": "commented"},
            "repository": _repository(repository), "sender": {"login": sender}}


def pull_request(repository: str, number: int, action: str, sender: str, *,
                 head_repo: str | None = None, head_sha: str = "0" * 40,
                 branch: str = "feature") -> dict[str, Any]:
    """A ``pull_request`` delivery; ``head_repo`` another repository for a fork's."""
    head = _repository(head_repo or repository)
    return {"action": action, "number": number,
            "pull_request": {"number": number, "state": "open", "title": "PR",
                             "head": {"ref": branch, "sha": head_sha, "repo": head},
                             "base": {"ref": "main", "repo": _repository(repository)}},
            "repository": _repository(repository), "sender": {"login": sender}}
