"""The matrix of an eval run: cells of (provider, model, role), each run ``repeat`` times."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from services.evals.errors import INVALID_MATRIX, EvalError
from services.execution.agent_profile import AgentProfile, ProfileError
from services.execution.profile_checks import agent_profile
from services.execution.providers.profiles import PROVIDERS, model_or_default

MAX_REPEAT = 100
MAX_CELLS = 64


@dataclass(frozen=True)
class Cell:
    provider: str
    model: str
    role: str | None

    @property
    def name(self) -> str:
        return f"{self.provider}/{self.model}/{self.role or '-'}"

    def profile(self) -> AgentProfile:
        try:
            return agent_profile(self.provider, self.model, role=self.role)
        except ProfileError as exc:
            raise EvalError(INVALID_MATRIX, f"{self.name}: {exc.code}: {exc.message}") from None


@dataclass(frozen=True)
class Matrix:
    cells: tuple[Cell, ...]
    repeat: int

    def as_json(self) -> dict[str, Any]:
        return {"cells": [{"provider": c.provider, "model": c.model, "role": c.role}
                          for c in self.cells], "repeat": self.repeat}


def _split(values: Sequence[str] | None) -> list[str]:
    return [part.strip() for value in values or () for part in value.split(",") if part.strip()]


def _models_for(provider: str, models: list[str]) -> list[str]:
    """``provider:model`` entries apply to their provider, plain ones to every provider."""
    mine = [m.split(":", 1)[1] for m in models if m.startswith(f"{provider}:")]
    plain = [m for m in models if ":" not in m]
    return mine + plain or [model_or_default(provider, None)]


def build_matrix(providers: Sequence[str] | None, models: Sequence[str] | None,
                 roles: Sequence[str] | None, repeat: int) -> Matrix:
    """The checked matrix (``--provider a,b --model ... --role ... --repeat N``)."""
    names = _split(providers) or ["replay"]
    unknown = [p for p in names if p not in PROVIDERS]
    if unknown:
        raise EvalError(INVALID_MATRIX, f"unknown provider {unknown[0][:60]!r}; choose from "
                                        f"{', '.join(PROVIDERS)}")
    if not 1 <= repeat <= MAX_REPEAT:
        raise EvalError(INVALID_MATRIX, f"--repeat must be between 1 and {MAX_REPEAT}")
    model_list = _split(models)
    role_list: list[str | None] = list(_split(roles)) or [None]
    cells = []
    for provider in dict.fromkeys(names):
        for model, role in itertools.product(_models_for(provider, model_list), role_list):
            cell = Cell(provider, model, role)
            cell.profile()  # checked now, before anything runs
            cells.append(cell)
    if len(cells) > MAX_CELLS:
        raise EvalError(INVALID_MATRIX, f"{len(cells)} cells; at most {MAX_CELLS}")
    return Matrix(tuple(dict.fromkeys(cells)), repeat)


def matrix_from_json(data: dict[str, Any]) -> Matrix:
    """The matrix a run recorded (a resumed run goes on with it)."""
    cells = tuple(Cell(str(c["provider"]), str(c["model"]),
                       None if c.get("role") is None else str(c["role"]))
                  for c in data.get("cells") or [])
    return Matrix(cells, int(data.get("repeat") or 1))
