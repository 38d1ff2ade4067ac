"""The grader: the agent's diff applied to a fresh checkout, the hidden tests added, the task's
setup commands run with the setup phase's network rules and each test run in the sandbox.

The diff is the execution's pushed head against the task's base commit, taken from the eval's
own bare repository (:mod:`services.evals.fixtures`). The checkout is new (a clone at the base
commit), so nothing the agent left in its workspace, or ran there, reaches the grading. Hidden
test files and a SWE-bench ``test_patch`` are added after the diff (they win over the agent's
version of the same file). Setup commands go through the egress proxy with the deployment's
allowlist and the task's names (:class:`services.runs.setup_phase.ControlledNetwork`, as in an
execution's setup phase); tests run offline in this process's sandbox (through the same proxy
when the task asks for ``network: allowlist``). A test passes when its command exits 0.

``resolved``: every ``fail_to_pass`` and ``pass_to_pass`` test passes and the changed paths
keep the task's rules (``must_change``, ``must_not_change``; a ``refusal`` task: no change).
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from services.composition import command_sandbox
from services.evals.errors import PATCH_FAILED
from services.evals.fixtures import TaskRepo
from services.evals.gitops import GitFailed, git
from services.evals.suite import EvalTask
from services.execution.errors import ConfigError, ErrorCode, StudioError
from services.execution.network.allowlist import AllowlistError, parse_allowlist
from services.execution.ports import AgentEventKind, CommandSandbox
from services.execution.tool_domains.command.process import run_prepared
from services.execution.tool_domains.command.tools import command_environment
from services.runs.setup_phase import ControlledNetwork, SetupCommand, run_setup
from services.settings import StudioSettings

OUTPUT_CAP = 64 * 1024
DETAIL_CHARS = 2000


@dataclass(frozen=True)
class Graded:
    resolved: bool
    passed: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    error_code: str | None = None
    detail: str | None = None


def changed_paths(repo: TaskRepo, head: str | None, home: Path) -> list[str]:
    if head is None or head == repo.base_commit:
        return []
    out = git("diff", "--name-only", "-z", repo.base_commit, head, cwd=repo.bare, home=home)
    return sorted(p for p in out.decode("utf-8", "replace").split("\x00") if p)


def rule_violations(task: EvalTask, changed: list[str]) -> list[str]:
    """What the changed paths break of the task's file rules (empty: none)."""
    problems = [f"must change {pattern}" for pattern in task.must_change
                if not any(fnmatchcase(path, pattern) for path in changed)]
    problems += [f"must not change {path}" for path in changed
                 if any(fnmatchcase(path, pattern) for pattern in task.must_not_change)]
    if task.expect == "refusal" and changed:
        problems.append(f"the task must be refused, and {len(changed)} path(s) changed")
    return problems


class Grader:
    def __init__(self, settings: StudioSettings) -> None:
        self.settings = settings
        self.sandbox = command_sandbox(settings)

    def grade(self, task: EvalTask, repo: TaskRepo, head: str | None) -> Graded:
        home = Path(tempfile.mkdtemp(prefix="studio-grade-home-"))
        try:
            changed = changed_paths(repo, head, home)
            with self._checkout(task, repo, head, home) as checkout:
                passed, failed = self._tests(task, checkout)
        except GitFailed as exc:
            return Graded(False, error_code=PATCH_FAILED, detail=str(exc)[:DETAIL_CHARS])
        except StudioError as exc:  # a setup command that failed, a sandbox that is missing
            return Graded(False, error_code=exc.code.value, detail=exc.message[:DETAIL_CHARS])
        finally:
            shutil.rmtree(home, ignore_errors=True)
        problems = rule_violations(task, changed)
        return Graded(not failed and not problems, passed, failed, changed,
                      detail="; ".join(problems)[:DETAIL_CHARS] or None)

    @contextlib.contextmanager
    def _checkout(self, task: EvalTask, repo: TaskRepo, head: str | None,
                  home: Path) -> Iterator[Path]:
        root = Path(tempfile.mkdtemp(prefix="studio-grade-"))
        checkout = root / "checkout"
        try:
            git("clone", "-q", "--no-checkout", str(repo.bare), str(checkout), cwd=root,
                home=home)
            git("checkout", "-q", "--detach", repo.base_commit, cwd=checkout, home=home)
            if head is not None and head != repo.base_commit:
                patch = git("diff", "--binary", repo.base_commit, head, cwd=repo.bare, home=home)
                if patch:
                    git("apply", "--binary", "-", cwd=checkout, home=home, stdin=patch)
            for name, content in task.hidden.items():
                _write_hidden(checkout, name, content)
            if task.test_patch:
                git("apply", "-", cwd=checkout, home=home, stdin=task.test_patch.encode())
            yield checkout
        finally:
            shutil.rmtree(root, ignore_errors=True)

    def _tests(self, task: EvalTask, checkout: Path) -> tuple[list[str], list[str]]:
        with self._network(task) as network:
            if task.setup and network is not None:
                run_setup([SetupCommand("request", c) for c in task.setup], network, checkout,
                          _ignore, timeout_s=self.settings.setup_timeout_s, cap=OUTPUT_CAP)
            sandbox: CommandSandbox = (network.sandbox if network is not None
                                       and task.network == "allowlist" else self.sandbox)
            passed: list[str] = []
            failed: list[str] = []
            for test in dict.fromkeys((*task.fail_to_pass, *task.pass_to_pass)):
                (passed if self._passes(sandbox, task.test_line(test), checkout)
                 else failed).append(test)
            return passed, failed

    @contextlib.contextmanager
    def _network(self, task: EvalTask) -> Iterator[ControlledNetwork | None]:
        if not task.setup and task.network != "allowlist":
            yield None
            return
        try:
            policy = parse_allowlist(self.settings.setup_allowlist, addresses=True).merged(
                parse_allowlist(task.network_allowlist, addresses=False))
        except AllowlistError as exc:
            raise ConfigError(f"network_allowlist: {exc}") from None
        network = ControlledNetwork(policy, self.sandbox)
        try:
            yield network
        finally:
            network.close()

    def _passes(self, sandbox: CommandSandbox, line: str, checkout: Path) -> bool:
        with tempfile.TemporaryDirectory(prefix="studio-test-", ignore_cleanup_errors=True) as t:
            prepared = sandbox.prepare(["/bin/sh", "-c", line], workspace=checkout,
                                       cwd=checkout, env=command_environment({}, Path(t)))
            outcome = run_prepared(prepared, timeout_s=self.settings.setup_timeout_s,
                                   cap=OUTPUT_CAP)
        return outcome.exit_code == 0 and not outcome.timed_out


class LinkedPath(StudioError):
    """A hidden test's path goes through a symbolic link the agent's diff made."""


def _write_hidden(checkout: Path, name: str, content: str) -> None:
    """Write a hidden test file, never through a link the agent made (a linked directory could
    point anywhere this process may write)."""
    target = checkout / name
    for parent in reversed(target.relative_to(checkout).parents):
        directory = checkout / parent
        if directory.is_symlink():
            raise LinkedPath(f"hidden test {name}: {parent} is a symbolic link in the agent's "
                             "change", code=ErrorCode.PATH_OUTSIDE_WORKSPACE)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.unlink(missing_ok=True)  # a link (or file) the agent left in its place goes
    target.write_text(content)


def _ignore(kind: AgentEventKind, data: dict[str, Any]) -> None:
    """The grader keeps no journal: the setup events of grading are not the execution's."""
