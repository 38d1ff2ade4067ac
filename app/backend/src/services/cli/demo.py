"""``studio demo``: the whole pipeline on a sample repository, with no API key and no services.

It creates a small repository whose test fails and a local bare remote for it, provisions an
ephemeral workspace from it (``provision_workspace``: the clone, the base commit and the agent's
branch ``studio/<execution-id>-fix-add``, checked out), and runs the replay provider through the
loop: run the tests, read, fix, run the tests again, commit, push. It prints the pushed branch,
its commit and where the run record is.
"""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:
    from services.execution.tool_domains.git.runner import GitAuthor

SAMPLE_FILES = {
    "calc.py": '"""A tiny calculator."""\n\n\ndef add(a: int, b: int) -> int:\n'
               "    return a - b\n",
    "test_calc.py": "import unittest\n\nfrom calc import add\n\n\n"
                    "class AddTest(unittest.TestCase):\n"
                    "    def test_add(self) -> None:\n"
                    "        self.assertEqual(add(2, 3), 5)\n\n\n"
                    'if __name__ == "__main__":\n    unittest.main()\n',
    "AGENTS.md": "Run the tests with `python3 -m unittest -q`.\n",
}
TEST_COMMAND = ["python3", "-m", "unittest", "-q"]


def _sample_repository(root: Path, author: GitAuthor) -> Path:
    """A bare remote holding the sample project on ``main``."""
    from services.execution.tool_domains.git.runner import run_git

    source = root / "sample"
    source.mkdir(parents=True)
    for name, text in SAMPLE_FILES.items():
        (source / name).write_text(text)
    run_git(source, ["init", "-q", "-b", "main"], author=author)
    run_git(source, ["add", "."], author=author)
    run_git(source, ["commit", "-q", "-m", "Sample project with a failing test"], author=author)
    remote = root / "origin.git"
    run_git(root, ["clone", "-q", "--bare", str(source), str(remote)], author=author)
    shutil.rmtree(source)
    return remote


def demo_script() -> dict[str, Any]:
    """The replayed trajectory: what a model would do to fix the sample."""
    final = {"status": "success", "summary": "Fixed add() (it subtracted); the tests pass.",
             "changes": ["calc.py: add returns a + b"], "issues": [], "questions": []}
    calls: list[list[dict[str, Any]]] = [
        [{"tool": "command.run", "args": {"argv": TEST_COMMAND}}],
        [{"tool": "workspace.read_file", "args": {"path": "calc.py"}}],
        [{"tool": "workspace.edit_file",
          "args": {"path": "calc.py", "old_text": "return a - b", "new_text": "return a + b"}}],
        [{"tool": "command.run", "args": {"argv": TEST_COMMAND}}],
        [{"tool": "git.add", "args": {"paths": ["calc.py"]}}],
        [{"tool": "git.commit", "args": {"message": "Fix add(): return the sum"}}],
    ]
    return {"turns": [{"tool_calls": c} for c in calls] + [{"final": final}]}


def _pushed_commit(remote: Path, branch: str | None, author: GitAuthor) -> str:
    from services.execution.tool_domains.git.runner import run_git

    if not branch:
        return ""
    head = run_git(remote.parent, ["--git-dir", str(remote), "rev-parse", f"refs/heads/{branch}"],
                   author=author, check=False)
    return head.text.strip() if head.returncode == 0 else ""


def demo_command(
    keep_workspace: bool = typer.Option(False, help="Keep the workspace after the run."),
) -> None:
    """Run the whole pipeline on a generated sample repository (replay provider, no API key)."""
    # The durable path (database, MCP bridge, providers) is imported when the command runs.
    from rich.console import Console

    from services.cli.database import open_db
    from services.cli.live import LiveConsoleSink
    from services.execution.tool_domains.git.runner import GitAuthor
    from services.runs.request import ExecutionRequest
    from services.runs.service import ExecutionService
    from services.settings import get_settings

    settings = get_settings()
    console = Console(stderr=True, highlight=False, soft_wrap=True)
    author = GitAuthor(settings.git_author_name, settings.git_author_email)
    remote = _sample_repository(settings.data_dir / "demo" / uuid.uuid4().hex[:12], author)
    console.print(f"[bold]sample repository[/] with a failing test: {remote}")
    request = ExecutionRequest(provider="replay", prompt="Make the failing test pass.",
                               repo_url=str(remote), script=demo_script(), pull_request=False,
                               slug="fix-add", allow_local=True)
    db = open_db()
    try:
        outcome = ExecutionService(db, settings).run(
            request, sinks=[LiveConsoleSink(console)], keep_workspace=keep_workspace)
    finally:
        db.dispose()
    execution_id = outcome.execution_id
    commit = _pushed_commit(remote, outcome.branch, author)
    record = f"studio executions show {execution_id}"
    run = outcome.run
    summary = {"execution_id": execution_id,
               "outcome": run.outcome.value if run is not None else None,
               "status": run.status if run is not None else "failed",
               "execution_status": outcome.status, "branch": outcome.branch if commit else None,
               "commit": commit or None, "remote": str(remote), "record": record}
    console.print(f"[bold]branch[/] {outcome.branch}\n[bold]commit[/] {commit}\n"
                  f"[bold]remote[/] {remote}\n[bold]run record[/] {record}")
    typer.echo(json.dumps(summary, separators=(",", ":")))
    raise typer.Exit(0 if outcome.succeeded and commit == outcome.head_sha else 1)
