"""Bearer-token authentication and scopes for everything under ``/api/``.

A route declares the scope it needs with ``dependencies=[requires(Scope.READ)]``. Scopes are exact
(``read``, ``run``, ``admin``; none implies another): a missing, unknown or revoked token is
``unauthorized`` (401), a token without the scope is ``forbidden`` (403), both as envelopes.
Tokens are verified against their SHA-256 hash (:mod:`services.db.api_tokens`).
"""

from __future__ import annotations

from typing import Any

import anyio.to_thread
from fastapi import Depends, Request
from fastapi.dependencies.models import Dependant
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from services.api.errors import ApiError
from services.db.api_tokens import ApiTokenRepository, Scope, TokenIdentity
from services.db.session import Database
from services.execution.errors import ErrorCode

__all__ = ["Scope", "ScopeRequirement", "TokenIdentity", "requires", "route_scope"]

_bearer = HTTPBearer(auto_error=False, description="An API token made by `studio tokens create`.")


def _bearer_token(request: Request) -> str:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise ApiError("a bearer token is required", code=ErrorCode.UNAUTHORIZED)
    return token.strip()


async def authenticate(request: Request) -> TokenIdentity:
    """The verified identity of the request's bearer token (verified once per request);
    ``unauthorized`` for a missing, unknown or revoked token."""
    known: TokenIdentity | None = getattr(request.state, "token", None)
    if known is not None:
        return known
    db: Database = request.app.state.db
    identity = await anyio.to_thread.run_sync(ApiTokenRepository(db).verify,
                                              _bearer_token(request))
    if identity is None:
        raise ApiError("the bearer token is unknown or revoked", code=ErrorCode.UNAUTHORIZED)
    request.state.token = identity
    return identity


class ScopeRequirement:
    """The dependency that checks the bearer token and its scope; ``scope`` says which."""

    def __init__(self, scope: Scope) -> None:
        self.scope = scope

    async def __call__(
        self, request: Request,
        credentials: HTTPAuthorizationCredentials | None = Depends(_bearer),  # noqa: B008
    ) -> TokenIdentity:
        if credentials is None or credentials.scheme.lower() != "bearer":
            raise ApiError("a bearer token is required", code=ErrorCode.UNAUTHORIZED)
        identity = await authenticate(request)
        if self.scope.value not in identity.scopes:
            raise ApiError(f"this endpoint needs the {self.scope.value!r} scope",
                           code=ErrorCode.FORBIDDEN,
                           details={"required_scope": self.scope.value})
        return identity


def requires(scope: Scope) -> Any:
    """``Depends`` on a :class:`ScopeRequirement` for ``scope`` (for a route's ``dependencies``)."""
    return Depends(ScopeRequirement(scope))


def route_scope(dependant: Dependant) -> Scope | None:
    """The scope a route's dependency tree declares, if any."""
    pending = list(dependant.dependencies)
    while pending:
        dependant = pending.pop()
        if isinstance(dependant.call, ScopeRequirement):
            return dependant.call.scope
        pending.extend(dependant.dependencies)
    return None
