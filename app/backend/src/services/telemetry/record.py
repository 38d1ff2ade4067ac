"""One-line recording calls for the engine and the durable path (metrics only; spans are
:mod:`services.telemetry.tracing`)."""

from __future__ import annotations

from services.telemetry.metrics import families


def model_call(provider: str, model: str, seconds: float) -> None:
    families().model_call_duration.labels(provider, model).observe(seconds)


def usage(provider: str, model: str, input_tokens: int, output_tokens: int,
          cost_usd: float, *, cached_input_tokens: int = 0,
          cache_write_input_tokens: int = 0) -> None:
    """Tokens by kind: ``input`` (all of them, cached included), ``cached_input`` (read from the
    prompt cache), ``cache_write`` (written to it), ``output``."""
    f = families()
    for kind, count in (("input", input_tokens), ("cached_input", cached_input_tokens),
                        ("cache_write", cache_write_input_tokens), ("output", output_tokens)):
        if count:
            f.tokens.labels(provider, model, kind).inc(count)
    if cost_usd > 0:
        f.cost.labels(provider, model).inc(cost_usd)


def retry(provider: str) -> None:
    families().retries.labels(provider).inc()


def execution_retry(code: str, status: str) -> None:
    """An execution attempt ended by an infrastructure error ``code``: ``queued`` again or
    ``dead_lettered``."""
    families().execution_retries.labels(code, status).inc()


def tool_call(domain: str, operation: str, outcome: str, seconds: float) -> None:
    families().tool_call_duration.labels(domain, operation, outcome).observe(seconds)


def attempt_ended(provider: str, outcome: str, status: str, seconds: float) -> None:
    f = families()
    f.execution_duration.labels(provider, outcome).observe(seconds)
    f.executions_ended.labels(status).inc()


def resumed(provider: str) -> None:
    families().resumes.labels(provider).inc()


def reaper_dispatch(reason: str) -> None:
    f = families()
    if reason == "expired":
        f.lease_expirations.inc()
    f.reaper_dispatches.labels(reason).inc()


def api_request(method: str, status: int) -> None:
    families().api_requests.labels(method, f"{status // 100}xx").inc()
