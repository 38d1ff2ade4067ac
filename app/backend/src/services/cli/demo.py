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
import tempfile
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from services.cli.database import open_db
from services.cli.live import LiveConsoleSink
from services.execution.tool_domains.git_runner import GitAuthor, run_git
from services.executions import ExecutionService, RunRequest
from services.settings import get_settings
from services.workspaces import cleanup, provision_workspace

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


def demo_script(branch: str) -> dict[str, Any]:
    """The replayed trajectory: what a model would do to fix the sample (on ``branch``, which
    provisioning already checked out)."""
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
        [{"tool": "git.push", "args": {}}],
    ]
    return {"turns": [{"tool_calls": c} for c in calls] + [{"final": final}]}


def demo_command(
    keep_workspace: bool = typer.Option(False, help="Keep the workspace after the run."),
) -> None:
    """Run the whole pipeline on a generated sample repository (replay provider, no API key)."""
    settings = get_settings()
    console = Console(stderr=True, highlight=False, soft_wrap=True)
    service = ExecutionService(open_db(), settings)
    prompt = "Make the failing test pass."
    placeholder = Path(tempfile.gettempdir())
    execution_id = service.create(RunRequest(provider="replay", prompt=prompt,
                                             workspace=placeholder))
    home = settings.data_dir / "demo" / execution_id
    author = GitAuthor(settings.git_author_name, settings.git_author_email)
    remote = _sample_repository(home, author)
    console.print(f"[bold]sample repository[/] with a failing test: {remote}")
    ws = provision_workspace(execution_id, str(remote), base_branch=None, token=None,
                             settings=settings, slug="fix add", allow_local=True)
    branch = ws.branch
    script_path = home / "replay.json"
    script_path.write_text(json.dumps(demo_script(branch), indent=2))
    try:
        result = service.execute(
            execution_id,
            RunRequest(provider="replay", prompt=prompt, workspace=ws.path,
                       script=script_path, branch=branch, default_branch=ws.base_branch,
                       repo_url=str(remote)),
            sinks=[LiveConsoleSink(console)],
        )
    finally:
        if not keep_workspace:
            cleanup(ws)
    head = run_git(home, ["--git-dir", str(remote), "rev-parse", f"refs/heads/{branch}"],
                   author=author, check=False)
    commit = head.text.strip() if head.returncode == 0 else ""
    record = f"studio executions show {result.execution_id}"
    summary = {"execution_id": result.execution_id, "outcome": result.outcome.value,
               "status": result.status, "branch": branch if commit else None,
               "commit": commit or None, "remote": str(remote), "record": str(record)}
    console.print(f"[bold]branch[/] {branch}\n[bold]commit[/] {commit}\n"
                  f"[bold]remote[/] {remote}\n[bold]run record[/] {record}")
    typer.echo(json.dumps(summary, separators=(",", ":")))
    raise typer.Exit(0 if result.succeeded and commit else 1)
