"""Pull-request reviews for the GitHub REST double (:mod:`tests.support.github_api`): stands for
GitHub's files, reviews and review-comments endpoints of a pull request, as PyGithub calls them.

* ``GET   /repos/{o}/{r}/pulls/{n}/files``     each changed file with its ``patch`` (the hunks of
  ``git diff base...head`` in the real bare repository, so the merge base is git's own)
* ``POST  /repos/{o}/{r}/pulls/{n}/reviews``   one review with its inline ``comments``; a comment
  on a line the diff does not show is refused with 422 ``Unprocessable Entity`` ("Line could not
  be resolved"), like GitHub, and nothing of the review is stored
* ``GET   /repos/{o}/{r}/pulls/{n}/reviews``   and ``GET /repos/{o}/{r}/pulls/{n}/comments``
* ``PATCH /repos/{o}/{r}/pulls/comments/{id}`` edit a review comment's body
* ``GET   /repos/{o}/{r}/commits/{sha}``       the commit a review is posted on (sha only)

``hold_posting`` makes the server store the next review and then never answer (until released):
the window in which a worker is killed while posting.
"""

from __future__ import annotations

import re
import subprocess
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tests.support.git_http_server import GIT_ENV

if TYPE_CHECKING:
    from tests.support.github_api import GitHubApi, StoredPull

Reply = tuple[int, Any, dict[str, str]]
BOT = {"login": "studio-bot", "id": 7, "type": "Bot"}
_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@")


@dataclass
class PullReviews:
    """The reviews and review comments posted to the double, and its hold switch."""

    reviews: list[dict[str, Any]] = field(default_factory=list)
    comments: list[dict[str, Any]] = field(default_factory=list)
    hold_posting: bool = False
    held: threading.Event = field(default_factory=threading.Event)  # a post is being held
    release: threading.Event = field(default_factory=threading.Event)

    def of(self, number: int) -> list[dict[str, Any]]:
        return [r for r in self.reviews if r["_pr"] == number]

    def comments_of(self, number: int) -> list[dict[str, Any]]:
        return [c for c in self.comments if c["_pr"] == number]


def _git(api: GitHubApi, pull: StoredPull, *args: str) -> str:
    bare = api.git_root / pull.owner / f"{pull.repo}.git"
    return subprocess.run(["git", f"--git-dir={bare}", *args], check=True, capture_output=True,
                          text=True, env={**GIT_ENV, "HOME": str(api.git_root)}).stdout


def pull_files(api: GitHubApi, pull: StoredPull) -> list[dict[str, Any]]:
    """The pull request's files, each with its patch (hunks only, as GitHub gives them)."""
    spec = f"refs/heads/{pull.base}...refs/heads/{pull.head}"
    files = []
    for line in _git(api, pull, "diff", "--name-status", "--no-renames", spec).splitlines():
        status, _, name = line.partition("\t")
        diff = _git(api, pull, "diff", "--no-color", "-U3", spec, "--", name)
        patch = diff[diff.find("@@"):] if "@@" in diff else ""
        files.append({"sha": "0" * 40, "filename": name, "patch": patch,
                      "status": {"A": "added", "D": "removed"}.get(status, "modified"),
                      "additions": sum(1 for p in patch.splitlines() if p.startswith("+")),
                      "deletions": sum(1 for p in patch.splitlines() if p.startswith("-")),
                      "changes": 0})
    return files


def _diff_lines(patch: str) -> set[int]:
    lines: set[int] = set()
    current: int | None = None
    for raw in patch.splitlines():
        hunk = _HUNK.match(raw)
        if hunk is not None:
            current = int(hunk.group(1))
        elif current is not None and not raw.startswith(("-", "\\")):
            lines.add(current)
            current += 1
    return lines


def route(api: GitHubApi, method: str, owner: str, repo: str, rest: str,
          payload: dict[str, Any]) -> Reply | None:
    """The reply for a reviews endpoint, or ``None`` when ``rest`` is not one."""
    commit = re.fullmatch(r"/commits/([0-9a-f]{40})", rest)
    if commit is not None and method == "GET":
        return 200, {"sha": commit.group(1), "url": f"{api.api_url}/repos/{owner}/{repo}"
                     f"/commits/{commit.group(1)}"}, {}
    edit = re.fullmatch(r"/pulls/comments/(\d+)", rest)
    if edit is not None and method == "PATCH":
        return _edit(api, int(edit.group(1)), payload)
    match = re.fullmatch(r"/pulls/(\d+)/(files|reviews|comments)", rest)
    if match is None:
        return None
    pull = next((p for p in api.pulls if (p.owner, p.repo, p.number)
                 == (owner, repo, int(match.group(1)))), None)
    if pull is None:
        return 404, {"message": "Not Found"}, {}
    kind = match.group(2)
    if method == "GET" and kind == "files":
        return 200, pull_files(api, pull), {}
    if method == "GET" and kind == "reviews":
        return 200, [_public(r) for r in api.reviews.of(pull.number)], {}
    if method == "GET" and kind == "comments":
        return 200, [_public(c) for c in api.reviews.comments_of(pull.number)], {}
    if method == "POST" and kind == "reviews":
        return _post(api, pull, payload)
    return 404, {"message": "Not Found"}, {}


def _public(document: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in document.items() if not k.startswith("_")}


def _post(api: GitHubApi, pull: StoredPull, payload: dict[str, Any]) -> Reply:
    event = payload.get("event") or "PENDING"
    if event not in ("COMMENT", "REQUEST_CHANGES", "APPROVE"):
        return 422, {"message": "Validation Failed", "errors": [f"bad event {event!r}"]}, {}
    diff = {f["filename"]: _diff_lines(f["patch"]) for f in pull_files(api, pull)}
    comments = payload.get("comments") or []
    for comment in comments:
        if comment.get("line") not in diff.get(str(comment.get("path")), set()):
            return 422, {"message": "Unprocessable Entity", "errors": [
                "Line could not be resolved"], "documentation_url":
                "https://docs.github.com/rest/pulls/reviews#create-a-review-for-a-pull-request"}, {}
    store = api.reviews
    with api.lock:
        number = len(store.reviews) + 1
        base = f"{api.base_url}/{pull.owner}/{pull.repo}/pull/{pull.number}"
        review = {"id": 500 + number, "user": BOT, "body": payload.get("body") or "",
                  "state": {"COMMENT": "COMMENTED", "APPROVE": "APPROVED"}.get(
                      event, "CHANGES_REQUESTED"),
                  "commit_id": payload.get("commit_id"), "submitted_at": "2026-11-28T12:00:00Z",
                  "html_url": f"{base}#pullrequestreview-{500 + number}", "_pr": pull.number}
        store.reviews.append(review)
        for comment in comments:
            ident = 900 + len(store.comments) + 1
            store.comments.append({
                "id": ident, "pull_request_review_id": review["id"], "user": BOT,
                "path": comment["path"], "line": comment["line"], "side": "RIGHT",
                "body": comment.get("body", ""), "commit_id": payload.get("commit_id"),
                "html_url": f"{base}#discussion_r{ident}", "_pr": pull.number,
                "url": f"{api.api_url}/repos/{pull.owner}/{pull.repo}/pulls/comments/{ident}"})
    if store.hold_posting:
        store.hold_posting = False
        store.held.set()
        store.release.wait(120)  # the client is killed meanwhile; the review stays posted
    return 200, _public(review), {}


def _edit(api: GitHubApi, ident: int, payload: dict[str, Any]) -> Reply:
    with api.lock:
        for comment in api.reviews.comments:
            if comment["id"] == ident:
                comment["body"] = str(payload.get("body", ""))
                return 200, _public(comment), {}
    return 404, {"message": "Not Found"}, {}
