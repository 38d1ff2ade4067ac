"""The GitHub client of the triggers: the integration's token and API URL, and a short cache
of permission answers (a storm of comments asks GitHub once per sender)."""

from __future__ import annotations

import threading
import time

from services.db.session import Database
from services.execution.errors import ConfigError
from services.repos.github_issues import WRITE_PERMISSIONS, GitHubIssues
from services.runs.request import resolve_token
from services.settings import StudioSettings

PERMISSION_TTL_S = 60.0
_cache: dict[tuple[str, str, str], tuple[float, str]] = {}
_lock = threading.Lock()


def client(db: Database, settings: StudioSettings, repository: str) -> GitHubIssues:
    token, api_url = resolve_token(db, settings)
    if token is None:
        raise ConfigError("no GitHub token: the triggers cannot read or comment")
    return GitHubIssues(api_url, token, repository)


def may_trigger(issues: GitHubIssues, login: str) -> tuple[bool, str]:
    """Whether ``login`` has write, maintain or admin permission (cached briefly)."""
    key = (issues.base, login.lower(), "permission")
    now = time.monotonic()
    with _lock:
        found = _cache.get(key)
    if found is None or now - found[0] > PERMISSION_TTL_S:
        found = (now, issues.permission(login))
        with _lock:
            _cache[key] = found
    return found[1] in WRITE_PERMISSIONS, found[1]
