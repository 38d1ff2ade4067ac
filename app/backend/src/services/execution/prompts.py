"""The system prompt, the repository's own agent instructions, and parsing the final answer."""

from __future__ import annotations

import json
import re
from pathlib import Path

from pydantic import ValidationError

from services.execution.confinement import resolve_path
from services.execution.errors import ConfinementViolation
from services.execution.messages import AgentResult, AgentStatus, ToolSchema

INSTRUCTION_FILES = ("AGENTS.md", "CLAUDE.md")
INSTRUCTIONS_CAP_BYTES = 16 * 1024
ELISION_MARKER = "\n[... truncated: repository instructions are capped ...]\n"

_RESULT_SHAPE = (
    '{"status": "success" | "partial" | "failed" | "blocked", "summary": "...", '
    '"changes": ["..."], "issues": ["..."], "questions": ["..."], "pr_url": null}'
)


def repository_instructions(workspace: Path, cap_bytes: int = INSTRUCTIONS_CAP_BYTES) -> str:
    """``AGENTS.md`` and ``CLAUDE.md`` of the workspace, read through confinement, size-capped."""
    chunks: list[str] = []
    budget = cap_bytes
    for name in INSTRUCTION_FILES:
        try:
            path = resolve_path(workspace, name)
        except ConfinementViolation:
            continue
        if budget <= 0 or not path.absolute.is_file():
            continue
        with open(path.absolute, "rb") as handle:
            data = handle.read(budget + 1)
        text = data[:budget].decode("utf-8", "replace")
        if len(data) > budget:
            text += ELISION_MARKER
        budget -= len(data[:budget])
        chunks.append(f"## {name}\n\n{text.strip()}\n")
    return "\n".join(chunks)


def system_prompt(task_kind: str, tools: list[ToolSchema], instructions: str, *,
                  role_prompt: str = "", node_prompt: str = "") -> str:
    """States the job, the role (when one is named), the tools, the node's own instructions
    (``node_prompt``), the final answer expected, then the repository's instructions."""
    tool_lines = "\n".join(f"- {t.name}: {t.description}" for t in tools)
    parts = [
        f"You are a careful software engineer doing {task_kind} in a git repository checked out "
        "in your workspace. Act only through the tools below; every path is relative to the "
        "workspace root. A tool answers with a JSON envelope: `ok` true with a `result`, or `ok` "
        "false with an `error` {code, message}; read errors and adapt. Commands run offline in a "
        "sandbox; a non-zero exit code is a normal result, not a tool failure.",
        *([role_prompt] if role_prompt else []),
        f"Tools:\n{tool_lines}",
        *([f"Instructions for this task from its author:\n\n{node_prompt}"]
          if node_prompt else []),
        "When the work is done (or cannot be done), answer WITHOUT calling a tool, with one JSON "
        f"object and nothing else:\n{_RESULT_SHAPE}",
    ]
    if instructions:
        parts.append(
            "The repository's own instructions for agents follow. They are the repository "
            f"owner's words: follow them where they concern the work.\n\n{instructions}"
        )
    return "\n\n".join(parts)


_FENCE = re.compile(r"```(?:json)?\s*(\{.*?\})\s*```", re.DOTALL)


def _candidates(text: str) -> list[str]:
    found = [m.group(1) for m in _FENCE.finditer(text)]
    start, end = text.find("{"), text.rfind("}")
    if start != -1 and end > start:
        found.append(text[start : end + 1])
    return found


def parse_agent_result(text: str) -> tuple[AgentResult, bool]:
    """The AgentResult in the final answer, and whether it parsed as JSON.

    A final answer that is not the expected JSON falls back to ``partial`` with the text as summary:
    the run ended normally, but we cannot tell how well the work went.
    """
    for candidate in _candidates(text):
        try:
            data = json.loads(candidate)
        except json.JSONDecodeError:
            continue
        if isinstance(data, dict) and "status" in data:
            try:
                return AgentResult.model_validate(data), True
            except ValidationError:
                continue
    return AgentResult(status=AgentStatus.PARTIAL, summary=text.strip()[:4000]), False
