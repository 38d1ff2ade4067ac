"""Flowchart templates: jinja2's sandbox, where a missing key is an error naming the node.

Prompts and command arguments are rendered by :class:`~jinja2.sandbox.SandboxedEnvironment` with
:class:`~jinja2.StrictUndefined` (never an empty string for a typo). The context is
:func:`template_context`: ``nodes.<id>.result`` for every node that succeeded so far, and
``inputs``, the run's inputs.
"""

from __future__ import annotations

from typing import Any

from jinja2 import StrictUndefined, TemplateError, TemplateSyntaxError, UndefinedError
from jinja2.sandbox import SandboxedEnvironment

_ENV = SandboxedEnvironment(undefined=StrictUndefined, autoescape=False)


class TemplateRenderError(ValueError):
    """A node's template could not be rendered (a missing key, a refused operation)."""

    def __init__(self, node_id: str, message: str) -> None:
        self.node_id = node_id
        super().__init__(f"node {node_id!r}: template error: {message}")


def template_syntax_errors(sources: list[str]) -> list[str]:
    """A message per source that does not parse."""
    errors = []
    for source in sources:
        try:
            _ENV.parse(source)
        except TemplateSyntaxError as exc:
            errors.append(f"{exc.message} (line {exc.lineno})")
    return errors


def render_template(node_id: str, source: str, context: dict[str, Any]) -> str:
    """``source`` rendered in the sandbox; a missing key raises :class:`TemplateRenderError`."""
    try:
        return _ENV.from_string(source).render(context)
    except UndefinedError as exc:
        raise TemplateRenderError(node_id, exc.message or "undefined value") from None
    except TemplateError as exc:
        raise TemplateRenderError(node_id, str(exc)) from None


def template_context(results: dict[str, dict[str, Any]], inputs: dict[str, Any]) -> dict[str, Any]:
    """What templates see: ``nodes.<id>.result`` of every succeeded node, and ``inputs``."""
    return {"nodes": {key: {"result": value} for key, value in results.items()},
            "inputs": inputs}
