"""``studio executions show`` (and ``--json``): cached tokens and the compactions of a run."""

from __future__ import annotations

import json

from services.db.executions import ExecutionRepository
from services.db.journal import DbEventSink
from services.db.redaction import Redactor
from services.db.session import Database
from services.execution.ports import AgentEvent, AgentEventKind
from tests.integration.databases import url_of
from tests.integration.db.cli_helpers import studio


def test_show_prints_cached_tokens_and_each_compaction_as_text(sqlite_db: Database) -> None:
    repo = ExecutionRepository(sqlite_db, Redactor())
    execution_id = repo.create(provider="codex", model="gpt-5.1", prompt="p")
    sink = DbEventSink(sqlite_db, Redactor())
    ours = {"elided": ["c1", "c2"], "replaced": 5, "summary": "<b>PLAN</b>",
            "before_tokens": 13_000, "after_tokens": 7_900, "window": 16_000}
    theirs = {"source": "claude_code", "trigger": "<script>x</script>", "before_tokens": 150_000}
    for data in (ours, theirs):
        sink.emit(AgentEvent(AgentEventKind.COMPACTION, execution_id, 3, data))
    usage = {"input_tokens": 1000, "output_tokens": 50, "cost_usd": 0.01,
             "cached_input_tokens": 800, "cache_write_input_tokens": 100}
    repo.finish(execution_id, status="succeeded", outcome="finished", usage=usage,
                cost_usd=0.01, iterations=2)
    url = url_of(sqlite_db)
    shown = json.loads(studio(url, "executions", "show", execution_id, "--json").stdout)
    assert shown["usage"]["cached_input_tokens"] == 800
    assert shown["compactions"] == [ours, theirs]
    rich = studio(url, "executions", "show", execution_id).stdout
    assert "1000 in (800 cached, 100 written to the cache) / 50 out" in rich
    assert "13000 -> 7900 tokens (window 16000), 2 outputs elided, 5 messages" in rich
    assert "by Claude Code (<script>x</script>, 150000 tokens" in rich  # text, as it came
