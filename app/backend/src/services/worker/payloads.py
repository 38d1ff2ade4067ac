"""The typed payloads of the Studio tasks: what a message must hold, checked before anything runs.

A message that does not validate fails its task once (it is acknowledged, never redelivered: a
malformed message does not become valid by retrying).
"""

from __future__ import annotations

from typing import Any, TypeVar
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field, ValidationError

P = TypeVar("P", bound=BaseModel)


class InvalidPayload(ValueError):
    """A task message whose payload does not validate."""


class ExecuteNodePayload(BaseModel):
    """``studio.execute_node``: the id of a recorded node execution, nothing else."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    execution_id: UUID

    def message(self) -> dict[str, str]:
        """The keyword arguments of the task message (JSON)."""
        return {"execution_id": str(self.execution_id)}


class DeliveryPayload(BaseModel):
    """``studio.process_delivery``: the id of a recorded GitHub webhook delivery."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    delivery_id: str = Field(pattern=r"^[A-Za-z0-9-]{1,100}$")

    def message(self) -> dict[str, str]:
        return {"delivery_id": self.delivery_id}


class ReapPayload(BaseModel):
    """``studio.reap``: no arguments."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def parse(model: type[P], kwargs: dict[str, Any]) -> P:
    """``kwargs`` validated as ``model``, else :class:`InvalidPayload` with pydantic's reasons."""
    try:
        return model.model_validate(kwargs)
    except ValidationError as exc:
        raise InvalidPayload(
            f"invalid {model.__name__}: {exc.error_count()} error(s): "
            + "; ".join(f"{'.'.join(map(str, e['loc'])) or '-'}: {e['msg']}" for e in exc.errors())
        ) from exc
