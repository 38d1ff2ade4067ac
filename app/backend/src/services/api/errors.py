"""Error responses of the API: the envelope shape, and the one place codes become HTTP statuses.

Every error answers ``{ok: false, error: {code, message, details, retryable, request_id,
correlation_id}}`` with a stable :class:`~services.execution.errors.ErrorCode`. Validation errors
are ``invalid_arguments`` (422), an unknown id ``not_found`` (404: every
:class:`~services.db.errors.NotFound`, mapped here and nowhere else), a missing or bad token
``unauthorized`` (401), a missing scope ``forbidden`` (403); anything unexpected is
``internal_error`` (500) and is logged, never swallowed.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict
from starlette.exceptions import HTTPException as StarletteHTTPException

from services.db.errors import NotFound
from services.execution.envelope import EnvelopeError
from services.execution.errors import ErrorCode, StudioError

log = logging.getLogger(__name__)

STATUS_BY_CODE: dict[ErrorCode, int] = {
    ErrorCode.INVALID_ARGUMENTS: 422,
    ErrorCode.HOST_NOT_ALLOWED: 422,
    ErrorCode.UNSUPPORTED_CAPABILITY: 422,
    ErrorCode.CONFIG_ERROR: 422,
    ErrorCode.NOT_FOUND: 404,
    ErrorCode.UNAUTHORIZED: 401,
    ErrorCode.FORBIDDEN: 403,
    ErrorCode.KILLSWITCH_ENGAGED: 503,  # nothing new starts until the switch is released
    ErrorCode.PROVIDER_UNAVAILABLE: 503,
    ErrorCode.INTEGRATION_UNAVAILABLE: 503,
    ErrorCode.HOST_PATH_REFUSED: 422,
    ErrorCode.WORKSPACE_REFUSED: 422,
    ErrorCode.REQUEST_TOO_LARGE: 413,
    ErrorCode.LIMIT_ABOVE_CEILING: 403,
    ErrorCode.OPERATOR_OVERRIDE_REFUSED: 403,
    ErrorCode.REPOSITORY_NOT_IN_TEAM: 403,
    ErrorCode.SELF_APPROVAL_REFUSED: 403,
    ErrorCode.DEPLOYMENT_WIDE_ONLY: 403,
    ErrorCode.UNKNOWN_ROLE: 422,
    ErrorCode.UNKNOWN_MCP_SERVER: 422,
    ErrorCode.MCP_SERVER_EXISTS: 409,
    ErrorCode.INVALID_APPROVAL_POLICY: 422,
    ErrorCode.APPROVAL_NOT_FOUND: 404,
    ErrorCode.APPROVAL_ALREADY_DECIDED: 409,
    ErrorCode.APPROVAL_EXPIRED: 409,
    ErrorCode.NOT_DEAD_LETTERED: 409,
}

CODE_BY_STATUS: dict[int, ErrorCode] = {
    400: ErrorCode.INVALID_ARGUMENTS,
    401: ErrorCode.UNAUTHORIZED,
    403: ErrorCode.FORBIDDEN,
    404: ErrorCode.NOT_FOUND,
    405: ErrorCode.UNSUPPORTED_OPERATION,
    422: ErrorCode.INVALID_ARGUMENTS,
}


class ApiError(StudioError):
    """An error raised by a handler on purpose; its code picks the HTTP status."""


class ErrorResponse(BaseModel):
    """The error envelope of every API error."""

    model_config = ConfigDict(extra="forbid")

    ok: bool = False
    error: EnvelopeError  # the same error object as a tool envelope's


#: For ``responses=`` of routes: the statuses any ``/api/`` route may answer with an envelope.
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorResponse, "description": description}
    for status, description in (
        (401, "No bearer token, or an unknown or revoked one (unauthorized)."),
        (403, "The token lacks the scope this endpoint needs (forbidden)."),
        (413, "The request body is over the deployment's size cap (request_too_large)."),
        (422, "The request is invalid (invalid_arguments)."),
    )
}
NOT_FOUND_RESPONSE: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorResponse, "description": "No resource has this id (not_found)."},
}


def request_ids(request: Request) -> tuple[str, str]:
    """``(request_id, correlation_id)`` set by the request-id middleware."""
    request_id = str(getattr(request.state, "request_id", "") or "")
    correlation_id = str(getattr(request.state, "correlation_id", "") or request_id)
    return request_id, correlation_id


def error_response(request: Request, status: int, code: ErrorCode, message: str, *,
                   details: dict[str, Any] | None = None, retryable: bool = False,
                   headers: dict[str, str] | None = None) -> JSONResponse:
    request_id, correlation_id = request_ids(request)
    body = ErrorResponse(error=EnvelopeError(
        code=code, message=message, details=details or {}, retryable=retryable,
        request_id=request_id, correlation_id=correlation_id,
    ))
    return JSONResponse(body.model_dump(mode="json"), status_code=status, headers=headers)


def _validation_details(exc: RequestValidationError) -> dict[str, Any]:
    errors = [{"loc": [str(part) for part in err.get("loc", ())], "msg": str(err.get("msg", "")),
               "type": str(err.get("type", ""))} for err in exc.errors()]
    return {"errors": errors}


async def _on_validation(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    return error_response(request, 422, ErrorCode.INVALID_ARGUMENTS, "the request is invalid",
                          details=_validation_details(exc))


async def _on_http(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    code = CODE_BY_STATUS.get(exc.status_code, ErrorCode.INTERNAL_ERROR)
    return error_response(request, exc.status_code, code, str(exc.detail),
                          headers=dict(exc.headers or {}))


async def _on_studio(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StudioError)
    status = STATUS_BY_CODE.get(exc.code, 500)
    if status == 500:
        log.error("request failed: %s", exc, exc_info=exc)
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return error_response(request, status, exc.code, exc.message, details=exc.details,
                          retryable=exc.retryable, headers=headers)


async def _on_not_found(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, NotFound)
    return error_response(request, 404, ErrorCode.NOT_FOUND, str(exc), details=exc.details)


async def _on_unexpected(request: Request, exc: Exception) -> JSONResponse:
    log.error("unexpected error on %s %s", request.method, request.url.path, exc_info=exc)
    return error_response(request, 500, ErrorCode.INTERNAL_ERROR, "internal error")


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(RequestValidationError, _on_validation)
    app.add_exception_handler(StarletteHTTPException, _on_http)
    app.add_exception_handler(StudioError, _on_studio)
    app.add_exception_handler(NotFound, _on_not_found)
    app.add_exception_handler(Exception, _on_unexpected)
