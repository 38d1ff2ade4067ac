"""The repository each task runs on: a bare repository of the eval's own, with the branch
:data:`BASE_BRANCH` at the task's base commit.

A fixture (the files of ``tasks/<id>/repo/``) becomes a one-commit repository; a ``repo`` (URL or
path) is cloned bare. Executions clone it and push their branches to it, so an eval never pushes
to the repository it came from; the grader takes each execution's diff from it.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from services.evals.errors import FIXTURE_FAILED, UNKNOWN_BASE_COMMIT, EvalError
from services.evals.gitops import GitFailed, git, without_credentials
from services.evals.suite import EvalTask

BASE_BRANCH = "studio-eval/base"


@dataclass(frozen=True)
class TaskRepo:
    bare: Path
    base_commit: str


def prepare_repo(task: EvalTask, root: Path) -> TaskRepo:
    """``root/<task id>.git`` with :data:`BASE_BRANCH` (kept when it exists: a resumed run)."""
    bare = root / f"{task.id}.git"
    home = root / ".home"
    home.mkdir(parents=True, exist_ok=True)
    try:
        if not (bare / "HEAD").is_file():
            _build(task, bare, home)
        commit = git("rev-parse", "--verify", f"refs/heads/{BASE_BRANCH}^{{commit}}",
                     cwd=bare, home=home).decode().strip()
    except GitFailed as exc:
        raise EvalError(FIXTURE_FAILED, f"task {task.id}: {exc}") from None
    return TaskRepo(bare, commit)


def _build(task: EvalTask, bare: Path, home: Path) -> None:
    staging = Path(tempfile.mkdtemp(prefix=f".{task.id}-", dir=bare.parent))
    try:
        if task.fixture is not None:
            _from_fixture(task.fixture, staging / "work", staging / "repo.git", home)
        else:
            assert task.repo is not None
            _from_repo(task, staging / "repo.git", home)
        (staging / "repo.git").rename(bare)  # whole or not at all
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _from_fixture(files: dict[str, str], work: Path, bare: Path, home: Path) -> None:
    work.mkdir(parents=True)
    for name, content in files.items():
        target = work / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
    git("init", "-q", "-b", BASE_BRANCH, cwd=work, home=home)
    git("add", "-A", cwd=work, home=home)
    git("commit", "-q", "-m", "fixture", cwd=work, home=home)
    git("clone", "-q", "--bare", str(work), str(bare), cwd=work.parent, home=home)


def _from_repo(task: EvalTask, bare: Path, home: Path) -> None:
    assert task.repo is not None
    git("clone", "-q", "--bare", "--", task.repo, str(bare), cwd=bare.parent, home=home)
    base = task.base_commit or "HEAD"
    try:
        git("branch", "-f", BASE_BRANCH, f"{base}^{{commit}}", cwd=bare, home=home)
    except GitFailed:
        raise EvalError(UNKNOWN_BASE_COMMIT, f"task {task.id}: base commit {base} is not in "
                                             f"{without_credentials(task.repo)}") from None
