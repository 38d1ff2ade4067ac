"""What one agent is asked to be: its role, its own instructions, its MCP servers, its models.

:class:`AgentProfile` is the part of an execution's request that shapes the agent itself (a
flowchart agent node, ``POST /api/executions`` and ``studio run`` give the same fields):

- ``role``: one of :data:`services.execution.roles.ROLES` (``implementer``, ``reviewer``,
  ``tester``), a documented prompt and the tool subset the role gets; none: every tool, no role
  prompt.
- ``system_prompt``: text added to the system prompt (after the role's, before the repository's
  own instructions, which still join), at most :data:`SYSTEM_PROMPT_MAX_CHARS` characters.
- ``mcp_servers``: names of stored MCP servers (``studio mcp``, ``/api/mcp-servers``) this agent
  gets on top of the deployment's ``STUDIO_MCP_CONFIG``; none by default.
- ``models``: the models in the order they are tried, ``{"provider": ..., "model": ...}`` objects
  or ``"provider:model"`` strings (``"provider"`` alone: its default model). The first is the
  execution's own provider and model; when a provider stays unavailable after the retries, the
  next takes over with the conversation so far.

Validation errors are :class:`ProfileError` (a ``ValueError``, so pydantic models that call
these checks report them as field errors) with a stable ``code``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

SYSTEM_PROMPT_MAX_CHARS = 32_000
MAX_MODELS = 5
MAX_MCP_SERVERS = 20
MODEL_NAME_MAX_CHARS = 200


class ProfileError(ValueError):
    """A profile field that cannot be used; ``code`` is stable (``unknown_role``,
    ``invalid_models``, ``duplicate_mcp_server``, ``system_prompt_too_long``...)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class ModelChoice:
    """One entry of ``models``: a provider and a model (``None``: the provider's default)."""

    provider: str
    model: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"provider": self.provider, "model": self.model}

    def label(self) -> str:
        return f"{self.provider}:{self.model}" if self.model else self.provider


def parse_model_choice(value: object, providers: Iterable[str]) -> ModelChoice:
    """One ``models`` entry from its object or ``"provider[:model]"`` string form."""
    known = tuple(providers)
    provider: object
    model: object
    if isinstance(value, ModelChoice):
        provider, model = value.provider, value.model
    elif isinstance(value, str):
        provider, colon, rest = value.partition(":")
        model = rest if colon else None
    elif isinstance(value, Mapping):
        extra = set(value) - {"provider", "model"}
        if extra:
            raise ProfileError("invalid_models",
                               f"a models entry has unknown keys: {', '.join(sorted(extra))}")
        provider, model = value.get("provider"), value.get("model")
    else:
        raise ProfileError("invalid_models",
                           'a models entry is {"provider": ..., "model": ...} or '
                           '"provider:model"')
    if not isinstance(provider, str) or provider not in known:
        raise ProfileError("invalid_models", f"unknown provider {str(provider)[:50]!r} in "
                                             f"models; choose one of {', '.join(known)}")
    if model is not None and (not isinstance(model, str) or not model.strip()
                              or len(model) > MODEL_NAME_MAX_CHARS):
        raise ProfileError("invalid_models", "a model name has 1 to 200 characters")
    return ModelChoice(provider, model)


def parse_models(values: Sequence[object] | None, providers: Iterable[str]
                 ) -> tuple[ModelChoice, ...]:
    """The ``models`` list: 1 to :data:`MAX_MODELS` entries, no entry twice."""
    if values is None:
        return ()
    if isinstance(values, str | bytes) or not isinstance(values, Sequence):
        raise ProfileError("invalid_models", "models is a list")
    if not values:
        raise ProfileError("invalid_models", "models must not be empty (leave it out instead)")
    if len(values) > MAX_MODELS:
        raise ProfileError("invalid_models", f"models lists at most {MAX_MODELS} entries")
    known = tuple(providers)
    choices = tuple(parse_model_choice(v, known) for v in values)
    seen: set[ModelChoice] = set()
    for choice in choices:
        if choice in seen:
            raise ProfileError("invalid_models", f"models names {choice.label()!r} twice")
        seen.add(choice)
    return choices


def check_system_prompt(value: str | None) -> str:
    """The node's own system prompt text, at most :data:`SYSTEM_PROMPT_MAX_CHARS`."""
    text = value or ""
    if len(text) > SYSTEM_PROMPT_MAX_CHARS:
        raise ProfileError("system_prompt_too_long",
                           f"system_prompt has {len(text)} characters; at most "
                           f"{SYSTEM_PROMPT_MAX_CHARS}")
    if "\x00" in text:
        raise ProfileError("invalid_system_prompt", "system_prompt holds a NUL character")
    return text


def check_mcp_server_names(values: Sequence[str] | None, pattern: str) -> tuple[str, ...]:
    """The named MCP servers: valid names (``pattern``), none twice, at most 20."""
    import re

    names = tuple(values or ())
    if len(names) > MAX_MCP_SERVERS:
        raise ProfileError("invalid_mcp_servers",
                           f"mcp_servers names at most {MAX_MCP_SERVERS} servers")
    seen: set[str] = set()
    for name in names:
        if not isinstance(name, str) or not re.fullmatch(pattern, name):
            raise ProfileError("invalid_mcp_servers",
                               f"{str(name)[:50]!r} is not an MCP server name "
                               "(1 to 20 of a-z A-Z 0-9 -)")
        if name in seen:
            raise ProfileError("duplicate_mcp_server", f"mcp_servers names {name!r} twice")
        seen.add(name)
    return names


@dataclass(frozen=True)
class AgentProfile:
    """The agent-shaping part of a request (see the module docstring); all optional."""

    role: str | None = None
    system_prompt: str = ""
    mcp_servers: tuple[str, ...] = ()
    models: tuple[ModelChoice, ...] = field(default_factory=tuple)

    def stored(self) -> dict[str, Any]:
        """The JSON form kept in an execution's ``request`` (read back by :meth:`from_stored`)."""
        return {"role": self.role, "system_prompt": self.system_prompt,
                "mcp_servers": list(self.mcp_servers),
                "models": [m.as_dict() for m in self.models]}

    @classmethod
    def from_stored(cls, data: Mapping[str, Any] | None) -> AgentProfile:
        if not data:
            return cls()
        return cls(role=data.get("role"), system_prompt=str(data.get("system_prompt") or ""),
                   mcp_servers=tuple(data.get("mcp_servers") or ()),
                   models=tuple(ModelChoice(str(m["provider"]), m.get("model"))
                                for m in data.get("models") or ()))

    def chain(self, provider: str, model: str | None) -> tuple[ModelChoice, ...]:
        """The models in the order they are tried: ``models`` when given, else the one."""
        return self.models or (ModelChoice(provider, model),)


def check_primary(models: Sequence[ModelChoice], provider: str, model: str | None) -> None:
    """``models[0]`` is the execution's own provider (and model, when one is named)."""
    if not models:
        return
    first = models[0]
    if first.provider != provider or (model is not None and first.model not in (None, model)):
        raise ProfileError("invalid_models",
                           f"models[0] ({first.label()}) must be the execution's own provider "
                           f"and model ({provider}{':' + model if model else ''})")


def primary_model(profile: AgentProfile) -> str | None:
    """The model ``models[0]`` names (``None``: none named, the provider's default)."""
    return profile.models[0].model if profile.models else None
