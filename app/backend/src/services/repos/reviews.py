"""Pull-request reviews on GitHub through PyGithub: read a pull request, post one review exactly
once.

:meth:`GitHubReviews.pull` reads the pull request (head sha and branch, base branch, each file's
patch). :meth:`GitHubReviews.post` posts a review, idempotently:

1. a review whose body carries the execution's marker (``<!-- studio-execution: ID -->``)
   exists already: it is the one (a worker killed while posting, resumed), nothing more is sent;
2. the pull request's earlier review comments carrying a finding marker
   (:func:`services.execution.review.finding_marker`) are matched to the new findings: a finding
   found again updates its earlier comment (no duplicate, F4); an earlier finding that is gone
   is edited to say it is resolved (REST cannot resolve a thread; GraphQL only);
3. the review is created with the new findings as inline comments.

Steps 2's edits are idempotent, so a retry after a crash at any point ends with exactly one
review. GitHub errors become ``ToolFailure`` (:func:`services.repos.pull_requests.github_failure`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from services.execution.review import marker_of
from services.repos.pull_requests import _call, execution_marker

if TYPE_CHECKING:
    from github.PullRequest import PullRequest
    from github.PullRequestComment import PullRequestComment

RESOLVED = "**Resolved**"


@dataclass(frozen=True)
class PullInfo:
    """What a review needs of a pull request."""

    number: int
    head_sha: str
    head_ref: str
    base_ref: str
    url: str
    patches: dict[str, str]


@dataclass(frozen=True)
class InlineComment:
    path: str
    line: int
    marker: str
    body: str  # ends with the marker


@dataclass
class Posted:
    """The posted review: its id and link, and each comment's action and link."""

    review_id: int
    url: str
    comments: list[dict[str, Any]] = field(default_factory=list)
    reused: bool = False


class GitHubReviews:
    """Reviews of ``owner/repo``'s pull requests."""

    def __init__(self, api_url: str, token: str, owner: str, repo: str) -> None:
        from github import Auth, Github

        self.full_name = f"{owner}/{repo}"
        self._github = Github(base_url=api_url.rstrip("/"), auth=Auth.Token(token), timeout=30,
                              retry=None, seconds_between_requests=0.0,
                              seconds_between_writes=0.0)

    def close(self) -> None:
        self._github.close()

    def _pull(self, number: int) -> PullRequest:
        return _call("read the pull request",
                     lambda: self._github.get_repo(self.full_name).get_pull(number))

    def pull(self, number: int) -> PullInfo:
        pull = self._pull(number)
        patches = _call("read the pull request's files",
                        lambda: {f.filename: f.patch or "" for f in pull.get_files()})
        return PullInfo(number, pull.head.sha, pull.head.ref, pull.base.ref, pull.html_url,
                        patches)

    def post(self, *, execution_id: str, number: int, commit_sha: str, body: str, event: str,
             comments: list[InlineComment]) -> Posted:
        pull = self._pull(number)
        marker = execution_marker(execution_id)
        earlier = _call("read the reviews", lambda: list(pull.get_reviews()))
        mine = next((r for r in earlier if marker in (r.body or "")), None)
        threads = _call("read the review comments", lambda: list(pull.get_review_comments()))
        if mine is not None:
            return Posted(mine.id, mine.html_url, [
                _link(c, "posted") for c in threads if c.pull_request_review_id == mine.id],
                reused=True)
        by_marker = {m: c for c in threads if (m := marker_of(c.body or "")) is not None}
        actions, fresh = self._update_earlier(by_marker, comments, commit_sha)
        repository = self._github.get_repo(self.full_name)
        commit = _call("read the head commit", lambda: repository.get_commit(commit_sha))
        review = _call("post the review", lambda: pull.create_review(
            commit=commit, body=f"{body.rstrip()}\n\n{marker}\n", event=event,
            comments=[{"path": c.path, "line": c.line, "side": "RIGHT", "body": c.body}
                      for c in fresh]))
        threads = _call("read the review comments", lambda: list(pull.get_review_comments()))
        actions += [_link(c, "posted") for c in threads if c.pull_request_review_id == review.id]
        return Posted(review.id, review.html_url, actions)

    def _update_earlier(self, by_marker: dict[str, PullRequestComment],
                        comments: list[InlineComment], commit_sha: str
                        ) -> tuple[list[dict[str, Any]], list[InlineComment]]:
        """Update the earlier comments of findings found again, resolve those gone; answers
        the actions and the comments still to post."""
        actions: list[dict[str, Any]] = []
        fresh: list[InlineComment] = []
        wanted = {c.marker for c in comments}
        for comment in comments:
            old = by_marker.get(comment.marker)
            if old is None:
                fresh.append(comment)
                continue
            text = f"{comment.body.replace(comment.marker, '').rstrip()}\n\n" \
                   f"_Still present at {commit_sha[:12]}._\n\n{comment.marker}"
            if old.body != text:
                _edit(old, text, "update a review comment")
            actions.append(_link(old, "updated"))
        for marker, old in by_marker.items():
            if marker in wanted or (old.body or "").startswith(RESOLVED):
                continue
            text = (f"{RESOLVED} at {commit_sha[:12]}: no longer found.\n\n"
                    f"~~{_first_line(old.body)}~~\n\n{marker}")
            _edit(old, text, "resolve a review comment")
            actions.append(_link(old, "resolved"))
        return actions, fresh


def _edit(comment: PullRequestComment, body: str, action: str) -> None:
    _call(action, lambda: comment.edit(body))


def _first_line(body: str | None) -> str:
    return (body or "").strip().splitlines()[0] if (body or "").strip() else ""


def _link(comment: PullRequestComment, action: str) -> dict[str, Any]:
    return {"id": comment.id, "path": comment.path, "line": comment.line,
            "url": comment.html_url, "action": action}
