"""An execution's journal as plain text lines: what ``studio executions logs`` prints.

The same story the run page tells: the model's text, each tool call with its arguments and its
result (a command's exit code, a non-zero one marked ``FAILED``, with the tails of its stdout and
stderr), error envelopes with code and message, usage, warnings, the finalization steps, and the
end (final status, branch, commit, pull request, tokens, cost). Plain text only: nothing in an
event is read as markup.
"""

from __future__ import annotations

import json
from typing import Any

TAIL_LINES = 20
ARGS_PREVIEW = 300


def tail(text: str, lines: int = TAIL_LINES) -> list[str]:
    """The last ``lines`` lines of ``text`` (none for empty text)."""
    kept = text.rstrip("\n").splitlines()
    return kept[-lines:] if text.strip() else []


def _args(args: Any) -> str:
    text = json.dumps(args, ensure_ascii=False, separators=(",", ":"), default=str)
    return text if len(text) <= ARGS_PREVIEW else text[: ARGS_PREVIEW - 3] + "..."


def output_lines(result: dict[str, Any], indent: str = "      ") -> list[str]:
    """A command result's stdout and stderr tails, each line prefixed with its stream."""
    out = []
    for stream in ("stdout", "stderr"):
        out += [f"{indent}{stream} | {line}" for line in tail(str(result.get(stream) or ""))]
    if result.get("truncated"):
        out.append(f"{indent}(output truncated)")
    return out


def result_lines(envelope: dict[str, Any]) -> list[str]:
    """The outcome of a tool call: ``ok``, ``exit N`` (``FAILED`` when not 0) or the error."""
    if not envelope.get("ok"):
        error = envelope.get("error") or {}
        return [f"    <- error {error.get('code')}: {error.get('message')}"]
    result = envelope.get("result") or {}
    if isinstance(result, dict) and "exit_code" in result:
        code = result.get("exit_code")
        verdict = "ok" if code == 0 else "FAILED"
        extra = " (timed out)" if result.get("timed_out") else ""
        return [f"    <- exit {code} {verdict}{extra}", *output_lines(result)]
    return ["    <- ok"]


def finalize_line(data: dict[str, Any]) -> str:
    step = data.get("step")
    if not data.get("ok"):
        error = data.get("error") or {}
        return f"finalize {step}: FAILED {error.get('code')}: {error.get('message')}"
    if step == "review":
        return f"finalize review: {data.get('verdict')} posted {data.get('url')}"
    if step == "commit":
        head = data.get("head_sha") or "-"
        return f"finalize commit: {'committed' if data.get('committed') else 'nothing new'}, " \
               f"head {head}"
    if step == "push":
        what = "pushed" if data.get("pushed") else "not pushed"
        note = f" ({data['note']})" if data.get("note") else ""
        return f"finalize push: {what} {data.get('branch')}{note}"
    if data.get("skipped"):
        return f"finalize pull_request: skipped ({data.get('note')})"
    return f"finalize pull_request: {data.get('url')} (#{data.get('number')})"


def event_lines(kind: str, cycle: int, data: dict[str, Any]) -> list[str]:
    """The lines of one journal event."""
    prefix = f"[{cycle:>3}] "
    if kind == "started":
        return [f"{prefix}started {data.get('provider')} ({data.get('model')})"]
    if kind == "model_response":
        text = str(data.get("text") or "").strip()
        return [f"{prefix}model: {line}" for line in text.splitlines()] if text else []
    if kind == "tool_call":
        call = data.get("call") or {}
        return [f"{prefix}  -> {call.get('domain')}.{call.get('operation')} "
                f"{_args(call.get('args') or {})}"]
    if kind == "tool_result":
        return result_lines(data.get("envelope") or {})
    if kind == "usage":
        total = data.get("total") or {}
        return [f"{prefix}tokens {total.get('input_tokens', 0)} in / "
                f"{total.get('output_tokens', 0)} out, cost ${total.get('cost_usd', 0):.4f}"]
    if kind == "warning":
        return [f"{prefix}warning: {data.get('message')}"]
    if kind == "finished":
        result = data.get("result") or {}
        lines = [f"{prefix}finished: {data.get('outcome')}"]
        if result.get("summary"):
            lines.append(f"      {result['summary']}")
        if data.get("error"):
            error = data["error"]
            lines.append(f"      error {error.get('code')}: {error.get('message')}")
        return lines
    if kind == "finalize":
        return [prefix + finalize_line(data)]
    if kind == "retry":  # services.runs.retries
        return [prefix + retry_line(data)]
    if kind == "model_fallback":  # services.execution.fallback
        source, target = data.get("from") or {}, data.get("to") or {}
        reason = data.get("reason") or {}
        return [f"{prefix}model fallback: {source.get('provider')}:{source.get('model')} -> "
                f"{target.get('provider')}:{target.get('model')} ({reason.get('code')})"]
    if kind in ("approval_requested", "approval_decided"):
        return [prefix + approval_line(kind, data)]
    if kind in ("setup", "network"):
        return [prefix + line for line in setup_lines(kind, data)]
    return []


def retry_line(data: dict[str, Any]) -> str:
    """A ``retry`` event: queued again (when), dead-lettered, or re-driven by an operator."""
    if data.get("redriven_by"):
        return f"re-driven from the dead-letter queue by {data.get('redriven_by')}"
    error = data.get("error") or {}
    what = f"attempt {data.get('attempts')} failed ({error.get('code')}: {error.get('message')})"
    if data.get("status") == "dead_lettered":
        return f"{what}: dead-lettered, waiting for an operator's retry or discard"
    return f"{what}: retried at {data.get('retry_at')}"


def approval_line(kind: str, data: dict[str, Any]) -> str:
    """An approval asked for, or decided (by whom, when, why)."""
    call = data.get("call") or {}
    tool = data.get("tool") or f"{call.get('domain')}.{call.get('operation')}"
    if kind == "approval_requested":
        return (f"waiting for approval {data.get('approval_id')} of {tool} "
                f"(rule {data.get('rule')}, expires {data.get('expires_at')})")
    reason = f": {data['reason']}" if data.get("reason") else ""
    return (f"approval {data.get('decision')} of {tool} by {data.get('decided_by')} "
            f"at {data.get('decided_at')}{reason}")


def setup_lines(kind: str, data: dict[str, Any]) -> list[str]:
    """A setup command's start or end, or a phase's network summary (services.runs.setup_phase)."""
    if kind == "network":
        lines = [f"network ({data.get('phase')}): {data.get('bytes_to_sandbox', 0)} bytes in, "
                 f"{len(data.get('blocked') or [])} refused"]
        for item in data.get("blocked") or []:
            lines.append(f"      refused {item.get('method')} {item.get('host')}:{item.get('port')}"
                         f" ({item.get('reason')}) by {item.get('command')}")
        return lines
    head = f"setup {int(data.get('index', 0)) + 1} ({data.get('source')})"
    if data.get("status") == "started":
        return [f"{head}: $ {data.get('command')}"]
    if data.get("status") == "output":
        return [f"{head} {data.get('stream')} | {line}"
                for line in str(data.get("text") or "").splitlines()]
    lines = [f"{head}: {data.get('status')}, exit {data.get('exit_code')}"
             + (" (timed out)" if data.get("timed_out") else "")]
    return lines + output_lines(data) if data.get("status") != "succeeded" else lines


def end_lines(end: dict[str, Any]) -> list[str]:
    """The terminal line: final status, branch, commit, pull request, tokens and cost."""
    usage = end.get("usage") or {}
    lines = [f"end: {end.get('status')}"
             + "".join(f" {key}={end[key]}" for key in ("branch", "head_sha", "pr_url")
                       if end.get(key))
             + f" tokens={usage.get('input_tokens', 0)}/{usage.get('output_tokens', 0)}"
             + f" cost=${float(end.get('cost_usd') or 0):.4f}"]
    if end.get("error_code"):
        lines.append(f"     error {end['error_code']}: {end.get('error_message')}")
    return lines
