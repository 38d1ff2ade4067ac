"""The pull-request port: GitHub through PyGithub, keyed by execution so a retry never opens two.

:class:`GitHubPullRequests` implements ``ports.PullRequestPort``:

1. the base branch (given, else the repository's default branch) must exist: a missing one is
   ``git_error`` (not retryable; ``details["reason"] == "base_branch_missing"``), so a renamed
   base branch is reported as such rather than as a failed create;
2. an open pull request from ``owner:head_branch`` into that base is looked up first (every
   page) and reused;
3. else one is created, with the execution id in the body (``<!-- studio-execution: ID -->``);
   a 422 "A pull request already exists" (another process won the race) is followed by a second
   lookup, and that pull request is reused.

GitHub errors become ``ToolFailure``: 401/403 ``auth_failed``; rate limits (403/429), 5xx and
connection errors ``integration_unavailable`` (retryable); anything else
``integration_unavailable`` (not retryable). PyGithub's own retries are off by default: the caller
retries.

:class:`KeyedPullRequestPort` wraps any port with a :class:`PullRequestLedger` (execution id →
``PullRequestRef``): the ledger is checked first, then the wrapped port is called once and its
answer recorded, so the same execution never opens a second pull request across retries.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from services.execution.errors import ErrorCode, ToolFailure
from services.execution.ports import PullRequestPort, PullRequestRef

if TYPE_CHECKING:  # PyGithub (about 0.3 s of imports) is loaded when GitHub is called
    from github import GithubException
    from github.PullRequest import PullRequest
    from github.Repository import Repository

MARKER_PREFIX = "<!-- studio-execution:"
T = TypeVar("T")


def execution_marker(execution_id: str) -> str:
    return f"{MARKER_PREFIX} {execution_id} -->"


def body_with_marker(body: str, execution_id: str) -> str:
    """``body`` ending with the execution's marker (added once)."""
    marker = execution_marker(execution_id)
    if marker in body:
        return body
    return f"{body.rstrip()}\n\n{marker}\n" if body.strip() else f"{marker}\n"


def github_failure(exc: GithubException | OSError, action: str) -> ToolFailure:
    """The one translation of a GitHub or transport error into a tool failure."""
    from github import RateLimitExceededException

    if isinstance(exc, OSError):
        return ToolFailure(ErrorCode.INTEGRATION_UNAVAILABLE,
                           f"GitHub is unreachable while trying to {action}: "
                           f"{type(exc).__name__}", details={"action": action}, retryable=True)
    status = exc.status
    message = exc.message or (exc.data.get("message") if isinstance(exc.data, dict) else None)
    details: dict[str, Any] = {"action": action, "status": status, "message": message}
    if isinstance(exc, RateLimitExceededException) or status == 429:
        return ToolFailure(ErrorCode.INTEGRATION_UNAVAILABLE, f"GitHub rate limit while trying "
                           f"to {action}", details=details, retryable=True)
    if status in (401, 403):
        return ToolFailure(ErrorCode.AUTH_FAILED, f"GitHub refused the token ({status}) while "
                           f"trying to {action}", details=details)
    if status >= 500:
        return ToolFailure(ErrorCode.INTEGRATION_UNAVAILABLE, f"GitHub failed ({status}) while "
                           f"trying to {action}", details=details, retryable=True)
    return ToolFailure(ErrorCode.INTEGRATION_UNAVAILABLE, f"GitHub answered {status} while "
                       f"trying to {action}: {message}", details=details)


def _already_exists(exc: GithubException) -> bool:
    if exc.status != 422 or not isinstance(exc.data, dict):
        return False
    texts = [str(exc.data.get("message", ""))]
    texts += [str(e.get("message", "")) for e in exc.data.get("errors", []) if isinstance(e, dict)]
    return any("already exists" in text.lower() for text in texts)


def _call(action: str, fn: Callable[[], T]) -> T:
    from github import GithubException

    try:
        return fn()
    except GithubException as exc:
        raise github_failure(exc, action) from None
    except OSError as exc:  # requests' connection errors are OSErrors
        raise github_failure(exc, action) from None


def _ref(pull: PullRequest, *, created: bool) -> PullRequestRef:
    return PullRequestRef(number=pull.number, url=pull.html_url, head_branch=pull.head.ref,
                          base_branch=pull.base.ref, created=created)


class GitHubPullRequests:
    """``ports.PullRequestPort`` for ``owner/repo`` on GitHub (or GitHub Enterprise)."""

    def __init__(self, api_url: str, token: str, owner: str, repo: str, *,
                 seconds_between_requests: float = 0.25, seconds_between_writes: float = 1.0,
                 timeout_s: int = 30, retry: int | None = None) -> None:
        self.owner = owner
        self.repo_name = repo
        from github import Auth, Github

        self._github = Github(base_url=api_url.rstrip("/"), auth=Auth.Token(token),
                              timeout=timeout_s, retry=retry,
                              seconds_between_requests=seconds_between_requests,
                              seconds_between_writes=seconds_between_writes)

    def close(self) -> None:
        self._github.close()

    def _repository(self) -> Repository:
        return _call("read the repository",
                     lambda: self._github.get_repo(f"{self.owner}/{self.repo_name}"))

    def _check_base(self, repository: Repository, base: str) -> None:
        from github import GithubException

        try:
            repository.get_branch(base)
        except GithubException as exc:
            if exc.status == 404:
                raise ToolFailure(
                    ErrorCode.GIT_ERROR,
                    f"the base branch {base!r} does not exist in {self.owner}/{self.repo_name}",
                    details={"reason": "base_branch_missing", "base_branch": base}) from None
            raise github_failure(exc, "check the base branch") from None
        except OSError as exc:
            raise github_failure(exc, "check the base branch") from None

    def find_open(self, repository: Repository, head_branch: str,
                  base_branch: str) -> PullRequest | None:
        """The open pull request from ``owner:head_branch`` into ``base_branch`` (all pages)."""
        def lookup() -> PullRequest | None:
            for pull in repository.get_pulls(state="open", head=f"{self.owner}:{head_branch}"):
                if pull.head.ref == head_branch and pull.base.ref == base_branch:
                    return pull
            return None
        return _call("look up open pull requests", lookup)

    def create_or_reuse(self, *, execution_id: str, workspace: Path, head_branch: str,
                        base_branch: str | None, title: str, body: str,
                        draft: bool) -> PullRequestRef:
        repository = self._repository()
        base = base_branch or repository.default_branch
        self._check_base(repository, base)
        existing = self.find_open(repository, head_branch, base)
        if existing is not None:
            return _ref(existing, created=False)
        text = body_with_marker(body, execution_id)
        from github import GithubException

        try:
            pull = repository.create_pull(base=base, head=head_branch, title=title, body=text,
                                          draft=draft)
        except GithubException as exc:
            if not _already_exists(exc):
                raise github_failure(exc, "create the pull request") from None
            again = self.find_open(repository, head_branch, base)
            if again is None:
                raise github_failure(exc, "create the pull request") from None
            return _ref(again, created=False)
        except OSError as exc:
            raise github_failure(exc, "create the pull request") from None
        return _ref(pull, created=True)


class PullRequestLedger(Protocol):
    """Where the pull request opened for each execution is recorded (the database in
    production)."""

    def get(self, execution_id: str) -> PullRequestRef | None: ...

    def put(self, execution_id: str, ref: PullRequestRef) -> None: ...


class InMemoryPullRequestLedger:
    """A :class:`PullRequestLedger` for one process (tests, the embedded CLI)."""

    def __init__(self) -> None:
        self._refs: dict[str, PullRequestRef] = {}
        self._lock = threading.Lock()

    def get(self, execution_id: str) -> PullRequestRef | None:
        with self._lock:
            return self._refs.get(execution_id)

    def put(self, execution_id: str, ref: PullRequestRef) -> None:
        with self._lock:
            self._refs[execution_id] = ref


class KeyedPullRequestPort:
    """A ``PullRequestPort`` that opens at most one pull request per execution."""

    def __init__(self, inner: PullRequestPort, ledger: PullRequestLedger) -> None:
        self.inner = inner
        self.ledger = ledger
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    @contextmanager
    def _serialized(self, execution_id: str) -> Iterator[None]:
        with self._guard:
            lock = self._locks.setdefault(execution_id, threading.Lock())
        with lock:
            yield

    def create_or_reuse(self, *, execution_id: str, workspace: Path, head_branch: str,
                        base_branch: str | None, title: str, body: str,
                        draft: bool) -> PullRequestRef:
        with self._serialized(execution_id):
            recorded = self.ledger.get(execution_id)
            if recorded is not None:
                return replace(recorded, created=False)
            ref = self.inner.create_or_reuse(
                execution_id=execution_id, workspace=workspace, head_branch=head_branch,
                base_branch=base_branch, title=title, body=body, draft=draft)
            self.ledger.put(execution_id, ref)
            return ref
