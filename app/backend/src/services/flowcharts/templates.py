"""Flowchart templates: jinja2's sandbox, where a missing key is an error naming the node.

Prompts and command arguments are rendered by :class:`~jinja2.sandbox.SandboxedEnvironment` with
:class:`~jinja2.StrictUndefined` (never an empty string for a typo). The context is
:func:`template_context`: ``nodes.<id>.result`` for every node that succeeded so far, and
``inputs``, the run's inputs.

Whatever goes wrong while rendering (a missing key, ``{{ 1/0 }}``, ``{{ 1 + 'a' }}``, a range or
a power or a repetition too large, output over :data:`MAX_OUTPUT_CHARS`) is one
:class:`TemplateRenderError`, which the run records as the node's failure (``template_error``).
The ``shell_quote`` filter quotes a value for ``/bin/sh`` (command nodes given as ``command``);
an ``argv`` list needs no quoting at all.
"""

from __future__ import annotations

import operator
import shlex
from typing import Any

from jinja2 import StrictUndefined, TemplateError, TemplateSyntaxError, UndefinedError
from jinja2.sandbox import SandboxedEnvironment

MAX_OUTPUT_CHARS = 1_000_000
MAX_EXPONENT = 1000


class _BoundedEnvironment(SandboxedEnvironment):
    """The sandbox, with ``*`` and ``**`` refused where they would make a huge value."""

    intercepted_binops = frozenset({"*", "**"})

    def call_binop(self, context: Any, operator_name: str, left: Any, right: Any) -> Any:
        if operator_name == "**":
            if isinstance(right, int | float) and abs(right) > MAX_EXPONENT:
                raise OverflowError(f"exponent {right} is over {MAX_EXPONENT}")
            return operator.pow(left, right)
        for value, count in ((left, right), (right, left)):
            if isinstance(value, str | list | tuple) and isinstance(count, int) \
                    and len(value) * count > MAX_OUTPUT_CHARS:
                raise OverflowError(f"repetition over {MAX_OUTPUT_CHARS} items")
        return operator.mul(left, right)


_ENV = _BoundedEnvironment(undefined=StrictUndefined, autoescape=False)
_ENV.filters["shell_quote"] = lambda value: shlex.quote(str(value))


class TemplateRenderError(ValueError):
    """A node's template could not be rendered (a missing key, a refused operation, an
    arithmetic or type error, output too large)."""

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
    """``source`` rendered in the sandbox; any failure raises :class:`TemplateRenderError`."""
    try:
        text = _ENV.from_string(source).render(context)
    except UndefinedError as exc:
        raise TemplateRenderError(node_id, exc.message or "undefined value") from None
    except TemplateError as exc:
        raise TemplateRenderError(node_id, str(exc)) from None
    except (ArithmeticError, TypeError, ValueError, LookupError, AttributeError,
            RecursionError, MemoryError) as exc:  # what template expressions can raise
        raise TemplateRenderError(node_id, f"{type(exc).__name__}: {exc}") from None
    if len(text) > MAX_OUTPUT_CHARS:
        raise TemplateRenderError(node_id, f"the rendered text is over {MAX_OUTPUT_CHARS} "
                                           "characters")
    return text


def template_context(results: dict[str, dict[str, Any]], inputs: dict[str, Any]) -> dict[str, Any]:
    """What templates see: ``nodes.<id>.result`` of every succeeded node, and ``inputs``."""
    return {"nodes": {key: {"result": value} for key, value in results.items()},
            "inputs": inputs}
