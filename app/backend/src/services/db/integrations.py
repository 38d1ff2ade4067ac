"""Integrations (GitHub): API URL and token, the token Fernet-encrypted at rest.

The encryption key is derived from ``STUDIO_SECRET_KEY`` (HKDF-SHA256); without it a token is
not stored. The token never leaves through an interface that prints: models mask it in ``repr``,
:class:`GithubIntegration` holds it as a ``SecretStr``, :meth:`IntegrationRepository.describe`
says only whether one is set.

Environment first: ``STUDIO_GITHUB_TOKEN``, ``STUDIO_GITHUB_API_URL`` and
``STUDIO_GITHUB_GIT_ORIGINS`` (when set) win over the stored values, which win over the defaults
(the git origins default to those the API URL implies). This module stores and reads the rows;
what the git origins mean (their normalization, their resolution) is the repository layer's:
:class:`services.repos.integration_store.IntegrationStore` is this repository with the origins
understood, and the one the rest of the backend uses for them.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import SecretStr
from sqlalchemy import select
from sqlalchemy.exc import ProgrammingError

from services.db.models import Integration
from services.db.session import Database
from services.execution.errors import ConfigError
from services.settings import StudioSettings

if TYPE_CHECKING:  # cryptography is loaded when a secret is encrypted or decrypted
    from cryptography.fernet import Fernet

GITHUB = "github"
GITHUB_WEBHOOK = "github_webhook"  # the webhook secret: a row of its own, encrypted alike
INSUFFICIENT_PRIVILEGE = "42501"  # SQLSTATE: a column this connection may not read
Source = Literal["environment", "database", "default", "none"]


def fernet_for(secret_key: SecretStr | None) -> Fernet:
    """The cipher for secrets at rest; refuses without ``STUDIO_SECRET_KEY``."""
    from cryptography.fernet import Fernet
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    if secret_key is None or not secret_key.get_secret_value():
        raise ConfigError("STUDIO_SECRET_KEY is not set: secrets cannot be stored encrypted")
    key = HKDF(algorithm=hashes.SHA256(), length=32, salt=b"studio-secrets-at-rest",
               info=b"fernet").derive(secret_key.get_secret_value().encode())
    return Fernet(base64.urlsafe_b64encode(key))


@dataclass(frozen=True)
class GithubIntegration:
    api_url: str
    token: SecretStr | None
    api_url_source: Source
    token_source: Source
    stored_git_origins: tuple[str, ...] = ()


class IntegrationRepository:
    def __init__(self, db: Database, settings: StudioSettings) -> None:
        self._db = db
        self._settings = settings

    def set_github(self, *, api_url: str | None, token: SecretStr | None,
                   git_origins: list[str] | None = None) -> None:
        """Store the API URL, the token (encrypted) and/or the git origins (as given: the
        caller normalizes them, :class:`services.repos.integration_store.IntegrationStore`; an
        empty list clears them); ``None`` leaves a value unchanged."""
        origins = git_origins
        encrypted = None
        if token is not None:
            encrypted = fernet_for(self._settings.secret_key).encrypt(
                token.get_secret_value().encode()
            )
        with self._db.session() as session:
            row = session.get(Integration, GITHUB) or Integration(kind=GITHUB)
            if api_url is not None:
                row.api_url = api_url
            if encrypted is not None:
                row.token_encrypted = encrypted
            if origins is not None:
                row.git_origins = origins or None
            session.add(row)

    def clear_github_token(self) -> None:
        with self._db.session() as session:
            row = session.get(Integration, GITHUB)
            if row is not None:
                row.token_encrypted = None

    def set_webhook_secret(self, secret: SecretStr) -> None:
        """Store the GitHub webhook secret (encrypted; what deliveries are signed with)."""
        encrypted = fernet_for(self._settings.secret_key).encrypt(
            secret.get_secret_value().encode())
        with self._db.session() as session:
            row = session.get(Integration, GITHUB_WEBHOOK) or Integration(kind=GITHUB_WEBHOOK)
            row.token_encrypted = encrypted
            session.add(row)

    def webhook_secret(self) -> SecretStr | None:
        """The stored webhook secret, or ``None`` (then every delivery is refused)."""
        with self._db.read_session() as session:
            encrypted = session.execute(select(Integration.token_encrypted)
                                        .where(Integration.kind == GITHUB_WEBHOOK)).scalar()
        if not encrypted:
            return None
        from cryptography.fernet import InvalidToken

        try:
            plain = fernet_for(self._settings.secret_key).decrypt(encrypted)
        except InvalidToken as exc:
            raise ConfigError("the stored webhook secret cannot be decrypted with this "
                              "STUDIO_SECRET_KEY") from exc
        return SecretStr(plain.decode())

    def _row(self) -> Integration | None:
        """The row without its token (see :meth:`_stored_token`)."""
        with self._db.session() as session:
            row = session.execute(
                select(Integration.kind, Integration.api_url, Integration.git_origins)
                .where(Integration.kind == GITHUB)).first()
        if row is None:
            return None
        return Integration(kind=row.kind, api_url=row.api_url, git_origins=row.git_origins)

    def _stored_token(self) -> bytes | None:
        """The encrypted token; ``None`` when there is none, or when this connection may not
        read it: an executor pod's per-execution login (migration 0013) is refused the column
        and gets the token, if its execution may have it, from its environment instead."""
        try:
            with self._db.session() as session:
                return session.execute(select(Integration.token_encrypted)
                                       .where(Integration.kind == GITHUB)).scalar()
        except ProgrammingError as exc:
            if getattr(exc.orig, "sqlstate", None) == INSUFFICIENT_PRIVILEGE:
                return None
            raise

    def _api_url(self, row: Integration | None) -> tuple[str, Source]:
        settings = self._settings
        if "github_api_url" in settings.model_fields_set:
            return settings.github_api_url, "environment"
        if row is not None and row.api_url:
            return row.api_url, "database"
        return settings.github_api_url, "default"

    def github(self) -> GithubIntegration:
        """The effective GitHub integration (environment, then database, then defaults)."""
        row = self._row()
        api_url, url_source = self._api_url(row)
        token, token_source = self._token(row)
        stored = tuple(row.git_origins or ()) if row is not None else ()
        return GithubIntegration(api_url, token, url_source, token_source, stored)

    def origin_inputs(self) -> tuple[str, list[str]]:
        """The effective API URL and the stored git origins (what the origins are resolved
        from, with ``STUDIO_GITHUB_GIT_ORIGINS``)."""
        row = self._row()
        api_url, _ = self._api_url(row)
        return api_url, list((row.git_origins or []) if row is not None else [])

    def _token(self, row: Integration | None) -> tuple[SecretStr | None, Source]:
        if self._settings.github_token is not None:
            return self._settings.github_token, "environment"
        encrypted = self._stored_token() if row is not None else None
        if encrypted is None:
            return None, "none"
        from cryptography.fernet import InvalidToken

        try:
            plain = fernet_for(self._settings.secret_key).decrypt(encrypted)
        except InvalidToken as exc:
            raise ConfigError(
                "the stored GitHub token cannot be decrypted with this STUDIO_SECRET_KEY"
            ) from exc
        return SecretStr(plain.decode()), "database"

    def describe(self) -> list[dict[str, Any]]:
        """Every integration without secrets: kind, API URL, whether a token is set, sources
        (the git origins join in :class:`services.repos.integration_store.IntegrationStore`).

        Nothing is decrypted here, so it works without ``STUDIO_SECRET_KEY``.
        """
        row = self._row()
        api_url, url_source = self._api_url(row)
        token_source: Source = "none"
        if self._settings.github_token is not None:
            token_source = "environment"
        elif row is not None and self._stored_token() is not None:
            token_source = "database"
        return [{
            "kind": GITHUB, "api_url": api_url, "api_url_source": url_source,
            "token_set": token_source != "none", "token_source": token_source,
        }]
