"""The provider capability matrix (the same table ``studio providers`` prints)."""

from __future__ import annotations

from fastapi import APIRouter

from services.api.auth import Scope, requires
from services.api.errors import ERROR_RESPONSES
from services.api.schemas import ProviderMatrix
from services.execution.providers.capabilities import matrix

router = APIRouter(prefix="/api", tags=["providers"], responses=ERROR_RESPONSES)


@router.get("/providers", response_model=ProviderMatrix, dependencies=[requires(Scope.READ)])
def provider_matrix() -> ProviderMatrix:
    """What each provider adapter does, and where each guard acts for it."""
    return ProviderMatrix(providers=matrix())
