"""Issues, comments, reactions and permissions on GitHub, through PyGithub: what the triggers
(:mod:`services.triggers`) read and post.

:class:`GitHubIssues` answers a login's permission on the repository, a pull request's head (its
branch, commit, whether it comes from a fork, whether the studio opened it), posts a reaction,
and puts a comment by marker: the hidden marker (an HTML comment, invisible when rendered) is
looked up among the issue's comments first, so a resumed execution edits its own comment
instead of adding another. GitHub errors become ``ToolFailure`` through the same translation as
the pull-request port (:func:`services.repos.pull_requests.github_failure`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import quote

from services.execution.errors import ToolFailure
from services.repos.pull_requests import MARKER_PREFIX, github_failure

T = TypeVar("T")
WRITE_PERMISSIONS = frozenset({"admin", "maintain", "write"})


@dataclass(frozen=True)
class PullHead:
    """A pull request's head as GitHub has it now."""

    number: int
    branch: str
    sha: str
    base_branch: str
    from_fork: bool
    opened_by_studio: bool  # its body carries the studio's execution marker


def _call(action: str, fn: Callable[[], T]) -> T:
    from github import GithubException

    try:
        return fn()
    except GithubException as exc:
        raise github_failure(exc, action) from None
    except OSError as exc:
        raise github_failure(exc, action) from None


class GitHubIssues:
    """The issue-side calls for ``owner/repo``."""

    def __init__(self, api_url: str, token: str, repository: str, *,
                 timeout_s: int = 15) -> None:
        from github import Auth, Github

        self.repository = repository
        self.base = f"{api_url.rstrip('/')}/repos/{repository}"
        self._github = Github(base_url=api_url.rstrip("/"), auth=Auth.Token(token),
                              timeout=timeout_s, retry=None, seconds_between_requests=0,
                              seconds_between_writes=0)

    def close(self) -> None:
        self._github.close()

    def _request(self, action: str, verb: str, path: str,
                 payload: dict[str, Any] | None = None) -> Any:
        requester = self._github.requester
        return _call(action, lambda: requester.requestJsonAndCheck(
            verb, f"{self.base}{path}", input=payload)[1])

    def permission(self, login: str) -> str:
        """``admin``, ``maintain``, ``write``, ``triage``, ``read`` or ``none``."""
        data = self._request("read a collaborator's permission", "GET",
                             f"/collaborators/{quote(login, safe='')}/permission")
        role = str(data.get("role_name") or "")
        return role if role in ("maintain", "triage") else str(data.get("permission") or "none")

    def pull_head(self, number: int) -> PullHead:
        data = self._request("read the pull request", "GET", f"/pulls/{int(number)}")
        head, base = data.get("head") or {}, data.get("base") or {}
        head_repo = (head.get("repo") or {}).get("full_name")
        base_repo = (base.get("repo") or {}).get("full_name") or self.repository
        fork = head_repo is None or str(head_repo).lower() != str(base_repo).lower()
        return PullHead(int(data["number"]), str(head.get("ref") or ""),
                        str(head.get("sha") or ""), str(base.get("ref") or ""), fork,
                        MARKER_PREFIX in str(data.get("body") or ""))

    def react(self, target: str, ident: int, content: str = "eyes") -> None:
        """A reaction on an issue (``issue``), an issue comment (``comment``) or a review
        comment (``review_comment``)."""
        path = {"issue": f"/issues/{int(ident)}/reactions",
                "comment": f"/issues/comments/{int(ident)}/reactions",
                "review_comment": f"/pulls/comments/{int(ident)}/reactions"}[target]
        self._request("react", "POST", path, {"content": content})

    def put_comment(self, number: int, marker: str, body: str) -> int:
        """Create the comment carrying ``marker`` on issue ``number``, or edit the one that
        already does; its id."""
        text = f"{body.rstrip()}\n\n{marker}\n"
        page = 1
        while True:
            found = self._request("list comments", "GET",
                                  f"/issues/{int(number)}/comments?per_page=100&page={page}")
            for comment in found:
                if marker in str(comment.get("body") or ""):
                    if comment.get("body") != text:
                        self._request("edit a comment", "PATCH",
                                      f"/issues/comments/{int(comment['id'])}", {"body": text})
                    return int(comment["id"])
            if len(found) < 100:
                break
            page += 1
        created = self._request("comment", "POST", f"/issues/{int(number)}/comments",
                                {"body": text})
        return int(created["id"])


__all__ = ["WRITE_PERMISSIONS", "GitHubIssues", "PullHead", "ToolFailure"]
