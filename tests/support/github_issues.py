"""More of the GitHub REST API for the triggers: stands for ``api.github.com``'s issues,
comments, reactions and collaborator permissions, plugged into :class:`GitHubApi` (the double
in ``github_api.py``) with :func:`plug_issues`.

* ``GET  /repos/{o}/{r}/collaborators/{login}/permission`` from :attr:`GitHubIssues.permissions`
  (a login not there: ``none``; ``maintain`` and ``triage`` are given as GitHub does, as
  ``role_name`` with ``permission`` ``write`` / ``read``)
* ``GET  /repos/{o}/{r}/pulls/{n}`` with ``head.repo`` / ``base.repo`` (a pull request listed in
  :attr:`GitHubIssues.forks` has its head in another repository, on another host)
* ``GET|POST /repos/{o}/{r}/issues/{n}/comments``, ``PATCH /repos/{o}/{r}/issues/comments/{id}``
* ``POST /repos/{o}/{r}/issues/{n}/reactions``, ``.../issues/comments/{id}/reactions``,
  ``.../pulls/comments/{id}/reactions``

Every comment and reaction is kept (:attr:`GitHubIssues.comments`, :attr:`GitHubIssues.reactions`)
so tests can count what the studio said and where.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from typing import Any

from tests.support.github_api import GitHubApi, Reply, _error

PERMISSION_OF_ROLE = {"maintain": "write", "triage": "read"}


@dataclass
class Comment:
    id: int
    number: int
    body: str
    edits: int = 0


@dataclass
class GitHubIssues:
    api: GitHubApi
    permissions: dict[str, str] = field(default_factory=dict)
    forks: dict[int, str] = field(default_factory=dict)  # PR number -> the fork's clone URL
    comments: list[Comment] = field(default_factory=list)
    reactions: list[tuple[str, int, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def comments_on(self, number: int, containing: str = "") -> list[Comment]:
        with self.lock:
            return [c for c in self.comments if c.number == number and containing in c.body]

    def __call__(self, method: str, owner: str, repo: str, rest: str,
                 payload: dict[str, Any]) -> Reply | None:
        if match := re.fullmatch(r"/collaborators/([^/]+)/permission", rest):
            return self._permission(match.group(1))
        if method == "GET" and (match := re.fullmatch(r"/pulls/(\d+)", rest)):
            return self._pull(owner, repo, int(match.group(1)))
        if match := re.fullmatch(r"/issues/(\d+)/comments", rest):
            return self._comments(method, int(match.group(1)), payload)
        if method == "PATCH" and (match := re.fullmatch(r"/issues/comments/(\d+)", rest)):
            return self._edit(int(match.group(1)), payload)
        if method == "POST" and (match := re.fullmatch(
                r"/(issues|issues/comments|pulls/comments)/(\d+)/reactions", rest)):
            with self.lock:
                self.reactions.append((match.group(1), int(match.group(2)),
                                       str(payload.get("content"))))
            return 201, {"id": len(self.reactions), "content": payload.get("content")}, {}
        return None

    def _permission(self, login: str) -> Reply:
        role = self.permissions.get(login, "none")
        permission = PERMISSION_OF_ROLE.get(role, role)
        return 200, {"permission": permission, "role_name": role,
                     "user": {"login": login, "id": 7}}, {}

    def _pull(self, owner: str, repo: str, number: int) -> Reply:
        for pull in self.api.pulls:
            if (pull.owner, pull.repo, pull.number) == (owner, repo, number):
                found = self.api.pull_json(pull)
                full = f"{owner}/{repo}"
                fork = self.forks.get(number)
                found["head"]["repo"] = ({"full_name": f"forker/{repo}", "fork": True,
                                          "clone_url": fork} if fork else
                                         {"full_name": full, "fork": False})
                found["base"]["repo"] = {"full_name": full, "fork": False}
                return 200, found, {}
        return _error(404, "Not Found")

    def _json(self, comment: Comment) -> dict[str, Any]:
        return {"id": comment.id, "body": comment.body, "user": {"login": "studio-bot", "id": 9},
                "html_url": f"{self.api.base_url}/comment/{comment.id}"}

    def _comments(self, method: str, number: int, payload: dict[str, Any]) -> Reply:
        with self.lock:
            if method == "POST":
                comment = Comment(1000 + len(self.comments), number, str(payload.get("body")))
                self.comments.append(comment)
                return 201, self._json(comment), {}
            return 200, [self._json(c) for c in self.comments if c.number == number], {}

    def _edit(self, ident: int, payload: dict[str, Any]) -> Reply:
        with self.lock:
            for comment in self.comments:
                if comment.id == ident:
                    comment.body, comment.edits = str(payload.get("body")), comment.edits + 1
                    return 200, self._json(comment), {}
        return _error(404, "Not Found")


def plug_issues(api: GitHubApi) -> GitHubIssues:
    """Add the issue endpoints to a running double; answers their state."""
    issues = GitHubIssues(api)
    api.extensions.append(issues)
    return issues
