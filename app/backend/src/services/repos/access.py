"""What an execution's repository may reach, and with which credential.

Checked when the execution is created (:func:`check_new_execution`: the CLI, the API and
flowchart nodes all go through ``create_execution``) and again when an attempt starts, before
any network access (:func:`repository_access`, from ``github_wiring``):

* the host must not be an internal address (:mod:`services.repos.hosts`): ``host_not_allowed``;
* a pull request on a repository outside the integration's git origins
  (:mod:`services.repos.origins`) is refused while the integration holds a token:
  ``integration_unavailable``. Without a token no credential exists, and the pull request is
  skipped as before (the finalizer notes it).

The :class:`~services.repos.origins.IntegrationGitAuth` returned is what every git network
operation of the execution asks for its environment.
"""

from __future__ import annotations

from services.db.session import Database
from services.repos.hosts import HostPolicy, Resolver, resolve
from services.repos.integration_store import IntegrationStore
from services.repos.origins import GitOrigins, IntegrationGitAuth
from services.repos.urls import ValidatedRepo, validate_repo_url
from services.settings import StudioSettings


def _checked_hosts(settings: StudioSettings, origins: GitOrigins, has_token: bool, *,
                   repo: ValidatedRepo, pull_request: bool, allow_local: bool,
                   resolver: Resolver) -> HostPolicy:
    hosts = HostPolicy.from_settings(settings, allow_loopback=allow_local, resolver=resolver)
    hosts.check(repo.url)
    if has_token and pull_request and not repo.local and not origins.allows(repo.url):
        raise origins.refusal(repo.url, "a pull request")
    return hosts


def repository_access(settings: StudioSettings, origins: GitOrigins, token: str | None, *,
                      repo: ValidatedRepo, pull_request: bool, allow_local: bool,
                      resolver: Resolver = resolve) -> IntegrationGitAuth:
    """The git credentials of an execution on ``repo``, after the checks of the module
    docstring (raises ``RepositoryHostRefused`` or ``ExecutionError(integration_unavailable)``)."""
    hosts = _checked_hosts(settings, origins, token is not None, repo=repo,
                           pull_request=pull_request, allow_local=allow_local, resolver=resolver)
    return IntegrationGitAuth(origins, hosts, token)


def check_new_execution(db: Database, settings: StudioSettings, repo_url: str, *,
                        pull_request: bool, allow_local: bool,
                        resolver: Resolver = resolve) -> None:
    """The checks of the module docstring for an execution about to be recorded (nothing is
    decrypted: whether a token is configured is enough)."""
    repo = validate_repo_url(repo_url, from_api=not allow_local)
    if repo.local:
        return
    integration = IntegrationStore(db, settings)
    has_token = bool(integration.describe()[0]["token_set"])
    _checked_hosts(settings, integration.git_origins(), has_token, repo=repo,
                   pull_request=pull_request, allow_local=allow_local, resolver=resolver)
