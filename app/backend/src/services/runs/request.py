"""What an execution was asked to do, recorded on its row so any process can run it.

One :class:`ExecutionRequest` for every execution: with a ``repo_url`` it is a repository run
(clone, loop, commit, push, pull request: :mod:`services.runs.durable`), with a ``workspace``
instead the loop runs in that directory and nothing is finalized.

``studio execute EXECUTION_ID`` knows nothing but the id: the provider, model, prompt, repository
URL and base branch are columns of ``node_executions``; the rest of a repository request (the
pull-request flag, the replay script, a GitHub repository override, the branch slug, whether a
local path is allowed) is the row's ``request`` JSON. :func:`create_execution` records a queued
execution with the runtime settings in force (limits and cutover).

:func:`github_wiring` resolves the token (``STUDIO_GITHUB_TOKEN``, else the stored integration)
and builds the git credentials and the one keyed pull-request port of an execution; the token
goes only to the integration's git origins (:mod:`services.repos.access`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from services.db.executions import ExecutionRepository
from services.db.flowcharts import run_owner
from services.db.models import NodeExecution
from services.db.pr_ledger import DbPullRequestLedger
from services.db.redaction import Redactor
from services.db.runtime_settings import LIMIT_KEYS, SettingsRepository
from services.db.session import Database
from services.db.teams import owning_team
from services.execution.agent_profile import AgentProfile
from services.execution.errors import ConfigError
from services.execution.ports import GitAuth, PullRequestPort
from services.execution.providers.profiles import model_or_default
from services.repos.access import check_new_execution, repository_access
from services.repos.integration_store import IntegrationStore
from services.repos.pull_requests import GitHubPullRequests, KeyedPullRequestPort
from services.repos.urls import ValidatedRepo, github_repo_from_url
from services.repos.workspaces import slugify
from services.runs.agent_setup import agent_snapshot
from services.runs.runtime_choice import runtime_choice
from services.runs.setup_request import check_network, check_setup_commands
from services.settings import StudioSettings


@dataclass(frozen=True)
class ExecutionRequest:
    """The request of one execution: exactly one of ``repo_url`` (a repository run: the row's
    columns plus its ``request`` JSON) and ``workspace`` (a directory that already holds the
    code; the replay ``script`` may then be a file)."""

    provider: str
    prompt: str
    repo_url: str | None = None
    pull_request: bool = True
    workspace: Path | None = None
    model: str | None = None
    base_branch: str | None = None
    script: Path | dict[str, Any] | None = None
    github_repo: str | None = None
    slug: str = ""
    allow_local: bool = False
    allow_workflow_changes: bool = False
    limit_overrides: dict[str, Any] = field(default_factory=dict)
    node_config: dict[str, Any] = field(default_factory=dict)
    profile: AgentProfile = field(default_factory=AgentProfile)  # role, prompt, MCP, models
    # services.execution.approvals: "domain.operation" | "domain.*" | "*" -> allow|deny|require
    approval_policy: dict[str, str] = field(default_factory=dict)
    # the setup phase and the network of agent commands (services.runs.setup_request)
    setup: tuple[str, ...] = ()
    network: str = "offline"
    network_allowlist: tuple[str, ...] = ()
    # a review execution's target (services.runs.review.ReviewTarget); None: it changes code
    review: dict[str, Any] | None = None
    # a follow-up on a pull request (services.triggers): the workspace is the pull request's
    # head branch at its current head, finalization pushes one commit on it (fast-forward
    # only) and opens no pull request; ``follow_up_base``: the pull request's base branch
    follow_up_branch: str | None = None
    follow_up_base: str | None = None
    pr_body_note: str = ""  # a line for the body of the pull request it opens ("Fixes #N")

    def __post_init__(self) -> None:
        if (self.repo_url is None) == (self.workspace is None):
            raise ConfigError("an execution request names exactly one of a repository URL "
                              "and a workspace directory")
        object.__setattr__(self, "setup", tuple(check_setup_commands(self.setup)))
        object.__setattr__(self, "network_allowlist", tuple(self.network_allowlist))
        check_network(self.network, self.network_allowlist)
        if self.follow_up_branch is not None and (self.repo_url is None or self.pull_request):
            raise ConfigError("a follow-up is a repository execution that opens no pull "
                              "request")
        if self.workspace is not None and (self.setup or self.network != "offline"
                                           or self.network_allowlist):
            raise ConfigError("setup commands and network access need a repository execution "
                              "(repo_url), not a workspace directory")

    @property
    def budget_key(self) -> str:
        """What the daily budget is kept per: the repository URL, else the directory."""
        if self.workspace is not None:
            return str(self.workspace.resolve())
        return self.repo_url or ""

    def stored(self) -> dict[str, Any]:
        """The ``request`` JSON of a repository run (what the columns do not hold)."""
        data = asdict(self)
        for column in ("provider", "prompt", "repo_url", "workspace", "model", "base_branch",
                       "limit_overrides", "node_config"):
            data.pop(column)
        data["profile"] = self.profile.stored()
        data["slug"] = self.slug or slugify(self.prompt)
        # the per-run limits (node config, then the run's own) are applied again at every
        # refresh of the limits, in whichever process runs the execution
        merged = {**self.node_config, **self.limit_overrides}
        data["limit_overrides"] = {k: v for k, v in merged.items() if k in LIMIT_KEYS}
        return data

    @classmethod
    def from_row(cls, row: NodeExecution) -> ExecutionRequest:
        stored = dict(row.request or {})
        known = {k: stored[k] for k in ("pull_request", "script", "github_repo", "slug",
                                        "allow_local", "allow_workflow_changes",
                                        "limit_overrides", "approval_policy", "setup",
                                        "network", "network_allowlist", "review",
                                        "follow_up_branch", "follow_up_base", "pr_body_note")
                 if k in stored}
        return cls(provider=row.provider, prompt=row.prompt, repo_url=row.repo_url or "",
                   model=row.model, base_branch=row.base_branch,
                   profile=AgentProfile.from_stored(stored.get("profile")), **known)


def create_execution(db: Database, request: ExecutionRequest, redactor: Redactor, *,
                     settings: StudioSettings, flowchart_run_id: str | None = None,
                     node_id: str | None = None, team_id: str | None = None,
                     created_by: tuple[str | None, str | None] = (None, None)) -> str:
    """Record a queued execution for ``request`` (a flowchart node's when linked); its id. A
    repository run is checked first (:func:`services.repos.access.check_new_execution`).

    ``team_id`` is the caller's team (``None``: deployment-wide); the execution belongs to it,
    or to the repository's team (:func:`services.db.teams.owning_team`: a repository assigned
    to another team is ``repository_not_in_team``). ``created_by``: ``(token id, name)``."""
    if flowchart_run_id is not None:  # a node's: its run's team, started by its run's starter
        run_team, starter = run_owner(db, flowchart_run_id)
        team_id = team_id or run_team
        if created_by[0] is None:
            created_by = starter
    owner = owning_team(db, request.repo_url, team_id)
    repository = request.repo_url is not None
    if request.repo_url is not None:
        check_new_execution(db, settings, request.repo_url, pull_request=request.pull_request,
                            allow_local=request.allow_local)
    snapshot = SettingsRepository(db).snapshot({**request.node_config,
                                                **request.limit_overrides})
    choice = runtime_choice(snapshot)
    snapshot["runtime"] = choice.as_dict()
    snapshot.update(agent_snapshot(db, settings, request.profile))
    return ExecutionRepository(db, redactor).create(
        provider=request.provider,
        model=model_or_default(request.provider, request.model),
        prompt=request.prompt, repo_url=request.repo_url,
        base_branch=request.base_branch if repository else None,
        workspace=str(request.workspace) if request.workspace is not None else None,
        limits=snapshot["limits"], settings_snapshot=snapshot,
        flowchart_run_id=flowchart_run_id, node_id=node_id,
        request=request.stored() if repository else None, runtime=choice.runtime,
        team_id=owner, created_by=created_by,
    )


@dataclass(frozen=True)
class GithubWiring:
    """The token (or none), git credentials for the repository's origin, the keyed PR port."""

    token: str | None
    git_auth: GitAuth | None
    pull_requests: KeyedPullRequestPort | None
    inner: GitHubPullRequests | None = None

    def close(self) -> None:
        if self.inner is not None:
            self.inner.close()


def resolve_token(db: Database, settings: StudioSettings) -> tuple[str | None, str]:
    """The GitHub token (environment, then the stored integration) and the API URL."""
    github = IntegrationStore(db, settings).github()
    token = github.token.get_secret_value() if github.token is not None else None
    return token, github.api_url


def github_wiring(db: Database, settings: StudioSettings, request: ExecutionRequest,
                  repo: ValidatedRepo) -> GithubWiring:
    """Credentials and the pull-request port for one execution (none for local paths); raises
    before any network access when the repository may not be reached or asks for a pull
    request the integration cannot open (:func:`services.repos.access.repository_access`)."""
    token, api_url = resolve_token(db, settings)
    if repo.local or repo.origin is None:
        return GithubWiring(token, None, None)
    origins = IntegrationStore(db, settings).git_origins()
    auth = repository_access(settings, origins, token, repo=repo,
                             pull_request=request.pull_request, allow_local=request.allow_local)
    if token is None or not request.pull_request:
        return GithubWiring(token, auth, None)
    owner, name = github_repo_from_url(repo.url, request.github_repo)
    inner = GitHubPullRequests(api_url, token, owner, name)
    port: PullRequestPort = inner
    return GithubWiring(token, auth, KeyedPullRequestPort(port, DbPullRequestLedger(db)), inner)
