"""Starting a review execution: the one function every entry point calls.

:func:`start_review` records a queued review execution (``kind: review``) of pull request
``pr_number`` of a repository: the ``pr_reviewer`` role (read-only tools and sandboxed commands;
no write, commit or push: a call to one is ``tool_not_allowed``), offline, no pull request to
open. When an earlier review of the same pull request was posted, the new one is incremental:
its request names the last reviewed commit and carries that review's findings. The API
(``POST /api/executions`` with ``kind: review``), ``studio review``, the flowchart ``review``
node and the GitHub triggers call it, then dispatch the execution as they dispatch any other.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from services.db.pr_reviews import PullRequestReviews
from services.db.session import Database
from services.execution.agent_profile import AgentProfile
from services.execution.errors import ConfigError
from services.repos.urls import github_repo_from_url
from services.runs.request import ExecutionRequest, resolve_token
from services.runs.review import REVIEW_ROLE, ReviewTarget
from services.settings import StudioSettings

MAX_PR_NUMBER = 10_000_000


def review_request(db: Database, settings: StudioSettings, repo_url: str, pr_number: int, *,
                   head_sha: str | None = None, provider: str = "codex",
                   model: str | None = None, script: Path | dict[str, Any] | None = None,
                   github_repo: str | None = None, allow_local: bool = False,
                   limit_overrides: dict[str, Any] | None = None) -> ExecutionRequest:
    """The request of a review of ``pr_number`` (incremental after a posted review)."""
    if isinstance(pr_number, bool) or not 0 < pr_number < MAX_PR_NUMBER:
        raise ConfigError("the pull request number must be a positive integer",
                          details={"field": "pr"})
    if head_sha is not None and not (len(head_sha) == 40 and all(
            c in "0123456789abcdef" for c in head_sha)):
        raise ConfigError("the head sha must be 40 lowercase hex digits",
                          details={"field": "head_sha"})
    if resolve_token(db, settings)[0] is None:
        raise ConfigError("a review needs a GitHub token (STUDIO_GITHUB_TOKEN or the stored "
                          "integration)", details={"field": "github"})
    owner, name = github_repo_from_url(repo_url, github_repo)
    last = PullRequestReviews(db).last_posted(f"{owner}/{name}", pr_number)
    target = ReviewTarget(pr_number, head_sha,
                          since_sha=last.head_sha if last is not None else None,
                          earlier=list(last.inline) if last is not None else [])
    return ExecutionRequest(
        provider=provider, model=model, repo_url=repo_url, pull_request=False, script=script,
        prompt=f"Review pull request #{pr_number} of {owner}/{name}", github_repo=github_repo,
        slug=f"review-{pr_number}", allow_local=allow_local,
        limit_overrides=dict(limit_overrides or {}),
        profile=AgentProfile(role=REVIEW_ROLE), review=target.stored())


def start_review(db: Database, settings: StudioSettings, repo_url: str, pr_number: int, *,
                 head_sha: str | None = None, provider: str = "codex", model: str | None = None,
                 script: Path | dict[str, Any] | None = None, github_repo: str | None = None,
                 allow_local: bool = False, flowchart_run_id: str | None = None,
                 node_id: str | None = None) -> str:
    """Record a queued review execution of ``repo_url``'s pull request ``pr_number`` (at
    ``head_sha`` when given, else its head when it runs); answers the execution id. The caller
    dispatches it (the worker queue, or ``studio execute ID``)."""
    # the execution service imports the engine that runs executions: not with this module,
    # which the API and the trigger rules import to record reviews
    from services.runs.service import ExecutionService

    request = review_request(db, settings, repo_url, pr_number, head_sha=head_sha,
                             provider=provider, model=model, script=script,
                             github_repo=github_repo, allow_local=allow_local)
    return ExecutionService(db, settings).create(request, flowchart_run_id=flowchart_run_id,
                                                 node_id=node_id)
