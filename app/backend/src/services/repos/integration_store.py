"""The integration store with its git origins understood.

:class:`services.db.integrations.IntegrationRepository` keeps the GitHub integration's rows (the
API URL, the encrypted token, the stored git origins as given). What the origins mean is this
layer's (:mod:`services.repos.origins`): :class:`IntegrationStore` normalizes the origins it
stores (a malformed one is refused, naming ``--git-origins``), resolves where the token may be
sent (``STUDIO_GITHUB_GIT_ORIGINS``, then the stored origins, then the API URL) and adds them to
:meth:`~IntegrationStore.describe`.
"""

from __future__ import annotations

from typing import Any

from pydantic import SecretStr

from services.db.integrations import IntegrationRepository
from services.repos.origins import GitOrigins, parse_origin


class IntegrationStore(IntegrationRepository):
    """:class:`IntegrationRepository` plus the integration's git origins."""

    def set_github(self, *, api_url: str | None, token: SecretStr | None,
                   git_origins: list[str] | None = None) -> None:
        """Store the API URL, the token (encrypted) and/or the git origins (normalized; an empty
        list clears them); ``None`` leaves a value unchanged. Nothing is stored when an origin
        is malformed."""
        origins = None if git_origins is None else sorted({parse_origin(o, "--git-origins")
                                                           for o in git_origins})
        super().set_github(api_url=api_url, token=token, git_origins=origins)

    def git_origins(self) -> GitOrigins:
        """Where the integration's token may be sent (environment, database, API URL)."""
        api_url, stored = self.origin_inputs()
        return GitOrigins.resolve(self._settings.github_git_origins, stored, api_url)

    def describe(self) -> list[dict[str, Any]]:
        """Every integration without secrets, with its git origins and where they come from."""
        origins = self.git_origins()
        return [{**entry, "git_origins": sorted(origins.origins),
                 "git_origins_source": origins.source} for entry in super().describe()]
