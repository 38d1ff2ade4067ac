"""Tokens and cost per task, before and after compaction with hysteresis (issue 33).

Run from the repository root (about a minute on 2 cores)::

    .venv/bin/python -m bench.long_context

Each task runs through the real loop and the real ``openai`` / ``google-genai`` SDKs against the
scripted model server with a :class:`~tests.support.model_context.ContextMeter`, which counts
every request's tokens and reports the cached prefix the way each vendor does; the same task runs
twice, side by side:

- ``before``: compaction off (``compaction_enabled`` false): the elision the loop did before,
  one old tool output per turn above ``context_token_budget`` (120,000), on a server without a
  window (with one it would end on the provider's 400);
- ``after``: compaction on, in the model's window.

Tasks:

- ``demo``: the trajectory of ``studio demo`` (run the tests, read, edit, run the tests, add,
  commit, answer) on its sample repository, in gpt-5.1's and gemini-2.5-pro's own windows;
- ``100-turn``: 100 reads of about 2,000 tokens of text each, then the answer, with a
  16,000-token window (``context_window_tokens``).

Reported per task and provider: the server-measured input tokens, the part reported cached, the
output tokens, the cost priced with the cached rates (gpt-5.1: $1.25 / $0.125 / $10 per 1M input /
cached / output tokens; gemini-2.5-pro: $1.25 / $0.125 / $10), the largest request, the
compactions, and the after/before ratios. Results go to ``bench/results/long_context.json``
(git-ignored); the exit status is 0 whatever the numbers.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import anyio  # noqa: E402
from tests.support.model_context import ContextMeter  # noqa: E402
from tests.support.model_script import Reply  # noqa: E402
from tests.support.model_server import (  # noqa: E402
    RequestRecord,
    ScriptedModelServer,
    text,
    tool_calls,
)

from services.cli.demo import SAMPLE_FILES, demo_script  # noqa: E402
from services.execution.agent_runtime import AgentDeps, FrontierAgent  # noqa: E402
from services.execution.compaction import SUMMARY_PROMPT  # noqa: E402
from services.execution.guards import AgentLimits, RetryPolicy  # noqa: E402
from services.execution.messages import provider_tool_name  # noqa: E402
from services.execution.ports import AgentEventKind, ModelClient  # noqa: E402
from services.execution.pricing import PriceTable  # noqa: E402
from services.execution.providers.codex import CodexClient  # noqa: E402
from services.execution.providers.gemini import GeminiClient  # noqa: E402
from services.execution.sandbox.selection import select_sandbox  # noqa: E402
from services.execution.sinks import MemorySink  # noqa: E402
from services.execution.tool_domains.context import ToolDomainContext  # noqa: E402
from services.execution.tool_domains.dispatch import Dispatcher  # noqa: E402
from services.execution.tool_domains.registry import default_registry  # noqa: E402

MODELS = {"codex": "gpt-5.1", "gemini": "gemini-2.5-pro"}
TURNS = 100
WINDOW = 16_000
_FILE = re.compile(rb"f(\d{3})\.txt")
_SUMMARY = SUMMARY_PROMPT[:40].encode()


@dataclass
class Measure:
    input_tokens: int
    cached_tokens: int
    output_tokens: int
    cost_usd: float
    largest_request: int
    compactions: int
    outcome: str


def _git(root: Path) -> None:
    import subprocess

    for argv in (["git", "init", "-q", "-b", "main"], ["git", "add", "-A"],
                 ["git", "-c", "user.name=b", "-c", "user.email=b@localhost", "commit", "-qm",
                  "init"]):
        subprocess.run(argv, cwd=root, check=True, capture_output=True)


def demo_workspace(root: Path) -> Path:
    root.mkdir(parents=True)
    for name, body in SAMPLE_FILES.items():
        (root / name).write_text(body)
    _git(root)
    return root


def reads_workspace(root: Path) -> Path:
    root.mkdir(parents=True)
    for n in range(TURNS):
        lines = [f"file {n:03d} line {i:02d}: " + "lorem ipsum dolor sit amet " * 2
                 for i in range(90)]
        (root / f"f{n:03d}.txt").write_text("\n".join(lines) + "\n")
    _git(root)
    return root


def demo_model() -> list[Any]:
    steps: list[Any] = []
    for turn in demo_script()["turns"]:
        if "final" in turn:
            steps.append(text(json.dumps(turn["final"])))
        else:
            steps.append(tool_calls([(provider_tool_name(c["tool"]), c["args"])
                                     for c in turn["tool_calls"]]))
    return steps


def reads_model(record: RequestRecord) -> Reply:
    if _SUMMARY in record.raw_body:
        return text("TASK: read every file in order\nPLAN: read the next one\nOPEN PROBLEMS: none")
    following = max((int(n) for n in _FILE.findall(record.raw_body)), default=-1) + 1
    if following >= TURNS:
        return text('{"status": "success", "summary": "read them all"}')
    return tool_calls([("workspace_read_file", {"path": f"f{following:03d}.txt"})])


def run(provider: str, ws: Path, steps: list[Any], *, window: int, compaction: bool) -> Measure:
    meter = ContextMeter(window=window if compaction and window else None)
    sink = MemorySink()
    limits = AgentLimits(max_iterations=400, max_budget_usd=1_000.0, stall_s=60.0,
                         context_window_tokens=window, compaction_enabled=compaction)
    with ScriptedModelServer(steps, meter=meter) as server:
        ctx = ToolDomainContext(workspace_root=ws, execution_id="bench-long-context",
                                request_id="bench", correlation_id="bench",
                                sandbox=select_sandbox("auto"))
        deps = AgentDeps(dispatcher=Dispatcher(default_registry()), ctx=ctx, sink=sink,
                         prices=PriceTable(), limits=limits,
                         retry=RetryPolicy(max_attempts=1))

        async def go() -> Any:
            client: ModelClient
            if provider == "codex":
                client = CodexClient(model=MODELS[provider], api_key="k",
                                     base_url=server.url + "/v1")
            else:
                client = GeminiClient(model=MODELS[provider], api_key="k", base_url=server.url)
            try:
                return await FrontierAgent(client, deps).run("Do the task.")
            finally:
                await client.aclose()

        result = anyio.run(go)
    accepted = meter.accepted()
    return Measure(meter.input_tokens(), meter.cached_tokens(), result.usage.output_tokens,
                   result.usage.cost_usd, max((m.tokens for m in accepted), default=0),
                   len(sink.of_kind(AgentEventKind.COMPACTION)), result.outcome.value)


def main() -> None:
    import tempfile

    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        reads_ws = reads_workspace(Path(tmp) / "reads")  # read only: shared
        for provider in MODELS:
            for task, window, steps in (("demo", 0, demo_model()),
                                        (f"{TURNS}-turn", WINDOW, [reads_model] * 1_000)):
                def ws(mode: str, task: str = task, provider: str = provider) -> Path:
                    if task != "demo":
                        return reads_ws
                    return demo_workspace(Path(tmp) / f"demo-{provider}-{mode}")  # it edits

                before = run(provider, ws("before"), list(steps), window=window,
                             compaction=False)
                after = run(provider, ws("after"), list(steps), window=window,
                            compaction=True)
                row = {"task": task, "provider": provider, "before": before.__dict__,
                       "after": after.__dict__,
                       "input_ratio": round(after.input_tokens / before.input_tokens, 3),
                       "cost_ratio": round(after.cost_usd / before.cost_usd, 3)}
                rows.append(row)
                print(f"{task:9} {provider:6} input {before.input_tokens:>9} -> "
                      f"{after.input_tokens:>8} ({row['input_ratio']:.2f}), cached "
                      f"{before.cached_tokens:>9} -> {after.cached_tokens:>8}, cost "
                      f"${before.cost_usd:.4f} -> ${after.cost_usd:.4f} "
                      f"({row['cost_ratio']:.2f}), largest {before.largest_request} -> "
                      f"{after.largest_request}, compactions {after.compactions}, "
                      f"{before.outcome}/{after.outcome}")
    out = Path("bench/results")
    out.mkdir(parents=True, exist_ok=True)
    (out / "long_context.json").write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
