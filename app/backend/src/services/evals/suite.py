"""The task format of ``studio eval`` and its two sources: a suite directory and a SWE-bench JSONL.

A suite directory::

    suite.json              {"name": "...", "tasks": ["id", ...]}   (tasks: default all)
    tasks/<id>/task.json    the task (below); "repo" + "base_commit", or a fixture:
    tasks/<id>/repo/        the files of the repository the fixture builds (one commit)
    tasks/<id>/hidden/      test files the grader adds; the agent never sees them
    tasks/<id>/replay.json  the replay trajectory (provider ``replay``)

``task.json``: ``prompt``, ``test_command`` (``{test}`` is replaced by one test id, quoted),
``fail_to_pass`` and ``pass_to_pass`` (test ids), optional ``setup`` (commands run before the
agent and before the tests, with the setup phase's network rules), ``must_change`` and
``must_not_change`` (glob patterns of paths), ``expect`` (``change``, or ``refusal``: resolved
only when nothing changed), ``network`` and ``network_allowlist``.

A SWE-bench JSONL line: ``repo`` (``owner/name`` on GitHub, a URL, or a path relative to the
file), ``instance_id``, ``base_commit``, ``problem_statement``, ``FAIL_TO_PASS`` and
``PASS_TO_PASS`` (lists, or JSON text of lists as SWE-bench ships them), optional
``test_patch`` (applied by the grader only), and ours: ``setup``, ``test_command``,
``studio_replay``.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from services.evals.errors import INVALID_SUITE, EvalError

TASK_ID = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$"
MAX_FILE_BYTES = 1024 * 1024
MAX_TASKS = 5000
DEFAULT_TEST_COMMAND = "python3 -m unittest -q {test}"


def _relative(path: str) -> str:
    pure = PurePosixPath(path)
    if not path or pure.is_absolute() or ".." in pure.parts or "\x00" in path:
        raise ValueError(f"{path!r} is not a relative path inside the repository")
    return str(pure)


class EvalTask(BaseModel):
    """One task: where its repository comes from, what the agent is asked, how it is graded."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=TASK_ID)
    prompt: str = Field(min_length=1, max_length=100_000)
    repo: str | None = Field(default=None, max_length=2000)
    fixture: dict[str, str] | None = None  # path -> content: the repository the fixture builds
    base_commit: str | None = Field(default=None, pattern=r"^[0-9a-fA-F]{4,64}$")
    setup: tuple[str, ...] = ()
    test_command: str = Field(default=DEFAULT_TEST_COMMAND, min_length=1, max_length=2000)
    fail_to_pass: tuple[str, ...] = ()
    pass_to_pass: tuple[str, ...] = ()
    hidden: dict[str, str] = Field(default_factory=dict)
    test_patch: str | None = None
    must_change: tuple[str, ...] = ()
    must_not_change: tuple[str, ...] = ()
    expect: Literal["change", "refusal"] = "change"
    replay: dict[str, Any] | None = None
    network: Literal["offline", "allowlist"] = "offline"
    network_allowlist: tuple[str, ...] = ()

    @field_validator("fixture", "hidden")
    @classmethod
    def _paths(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        if value is None:
            return None
        return {_relative(k): v for k, v in value.items()}

    @field_validator("fail_to_pass", "pass_to_pass")
    @classmethod
    def _tests(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for test in value:
            if not test or len(test) > 500 or any(c in test for c in "\x00\n\r"):
                raise ValueError(f"test id {test[:80]!r} is empty, too long or has a newline")
        return value

    @field_validator("test_command")
    @classmethod
    def _template(cls, value: str) -> str:
        if "{test}" not in value:
            raise ValueError("test_command must hold {test} (one test id per run)")
        return value

    def check_source(self) -> EvalTask:
        if (self.repo is None) == (self.fixture is None):
            raise EvalError(INVALID_SUITE, f"task {self.id}: give exactly one of a repository "
                                           "(repo, base_commit) and a fixture (repo/ directory)")
        if not self.fail_to_pass and not self.pass_to_pass:
            raise EvalError(INVALID_SUITE, f"task {self.id}: no test to grade it by "
                                           "(fail_to_pass, pass_to_pass)")
        return self

    def test_line(self, test: str) -> str:
        import shlex

        return self.test_command.replace("{test}", shlex.quote(test))


class Suite(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    source: str
    tasks: tuple[EvalTask, ...]

    def fingerprint(self) -> str:
        """What a resumed run checks: the same tasks, asked and graded the same way."""
        data = json.dumps([t.model_dump(mode="json") for t in self.tasks], sort_keys=True)
        return hashlib.sha256(data.encode()).hexdigest()

    def task(self, task_id: str) -> EvalTask:
        return next(t for t in self.tasks if t.id == task_id)


def _task(data: Any, where: str) -> EvalTask:
    if not isinstance(data, dict):
        raise EvalError(INVALID_SUITE, f"{where}: a task is a JSON object")
    try:
        return EvalTask.model_validate(data).check_source()
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        raise EvalError(INVALID_SUITE, f"{where}: {field}: {first['msg']}") from None


def _read_text(path: Path) -> str:
    if path.is_symlink():
        raise EvalError(INVALID_SUITE, f"{path}: symbolic links are not read")
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise EvalError(INVALID_SUITE, f"{path}: larger than {MAX_FILE_BYTES} bytes")
        return path.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise EvalError(INVALID_SUITE, f"{path}: cannot be read: {exc}") from None


def _json(path: Path) -> Any:
    try:
        return json.loads(_read_text(path))
    except ValueError as exc:
        raise EvalError(INVALID_SUITE, f"{path}: not JSON: {exc}") from None


BYTECODE_DIRECTORY = "__pycache__"


def _tree(root: Path) -> dict[str, str]:
    """Every file under ``root`` (a fixture or hidden tests) as relative path -> text; the
    bytecode Python leaves in ``__pycache__`` when a fixture's code is run or compiled in place
    is not part of a task, and is skipped (as a repository's ``.gitignore`` usually says)."""
    files: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        if BYTECODE_DIRECTORY in path.relative_to(root).parts:
            continue
        if path.is_symlink():
            raise EvalError(INVALID_SUITE, f"{path}: symbolic links are not read")
        if path.is_file():
            files[path.relative_to(root).as_posix()] = _read_text(path)
    return files


def load_directory(root: Path) -> Suite:
    """A suite directory (see the module docstring)."""
    meta = _json(root / "suite.json") if (root / "suite.json").is_file() else None
    if not isinstance(meta, dict):
        raise EvalError(INVALID_SUITE, f"{root}: no suite.json object")
    tasks_dir = root / "tasks"
    names = meta.get("tasks")
    if names is None:
        names = sorted(p.name for p in tasks_dir.iterdir() if p.is_dir()) \
            if tasks_dir.is_dir() else []
    if not isinstance(names, list) or not names or len(names) > MAX_TASKS:
        raise EvalError(INVALID_SUITE, f"{root}: suite.json lists no tasks")
    tasks = []
    for name in names:
        if not isinstance(name, str) or not _valid_id(name):
            raise EvalError(INVALID_SUITE, f"{root}: task name {str(name)[:80]!r} is not valid")
        tasks.append(_directory_task(tasks_dir / name, name))
    return _suite(str(meta.get("name") or root.name), str(root), tasks)


def _directory_task(folder: Path, name: str) -> EvalTask:
    data = _json(folder / "task.json")
    if not isinstance(data, dict):
        raise EvalError(INVALID_SUITE, f"{folder}/task.json: a task is a JSON object")
    data = {"id": name, **data}
    if (folder / "repo").is_dir():
        data["fixture"] = _tree(folder / "repo")
    if (folder / "hidden").is_dir():
        data["hidden"] = _tree(folder / "hidden")
    if (folder / "replay.json").is_file():
        data["replay"] = _json(folder / "replay.json")
    if isinstance(data.get("repo"), str) and not _is_url(data["repo"]):
        data["repo"] = str((folder / data["repo"]).resolve())
    return _task(data, str(folder))


def _valid_id(name: str) -> bool:
    import re

    return re.fullmatch(TASK_ID, name) is not None


def _is_url(repo: str) -> bool:
    return "://" in repo or repo.startswith("git@")


def _listed(value: Any, field: str, where: str) -> list[str]:
    """SWE-bench ships FAIL_TO_PASS and PASS_TO_PASS as JSON text of lists."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise EvalError(INVALID_SUITE, f"{where}: {field} is not a list") from None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise EvalError(INVALID_SUITE, f"{where}: {field} is not a list of test ids")
    return value


def _swe_repo(repo: Any, base: Path, where: str) -> str:
    if not isinstance(repo, str) or not repo:
        raise EvalError(INVALID_SUITE, f"{where}: repo is missing")
    if _is_url(repo):
        return repo
    candidate = (base / repo)
    if candidate.exists():
        return str(candidate.resolve())
    if repo.count("/") == 1:
        return f"https://github.com/{repo}.git"
    raise EvalError(INVALID_SUITE, f"{where}: repo {repo[:200]!r} is no URL, path or owner/name")


def swe_instance(data: Any, base: Path, where: str) -> EvalTask:
    """One SWE-bench instance as a task."""
    if not isinstance(data, dict):
        raise EvalError(INVALID_SUITE, f"{where}: an instance is a JSON object")
    missing = [k for k in ("repo", "instance_id", "base_commit", "problem_statement",
                           "FAIL_TO_PASS", "PASS_TO_PASS") if k not in data]
    if missing:
        raise EvalError(INVALID_SUITE, f"{where}: missing {', '.join(missing)}")
    task: dict[str, Any] = {
        "id": data["instance_id"], "prompt": data["problem_statement"],
        "repo": _swe_repo(data["repo"], base, where), "base_commit": data["base_commit"],
        "fail_to_pass": _listed(data["FAIL_TO_PASS"], "FAIL_TO_PASS", where),
        "pass_to_pass": _listed(data["PASS_TO_PASS"], "PASS_TO_PASS", where)}
    for ours, theirs in (("test_patch", "test_patch"), ("setup", "setup"),
                         ("test_command", "test_command"), ("replay", "studio_replay")):
        if data.get(theirs) is not None:
            task[ours] = data[theirs]
    return _task(task, where)


def load_jsonl(path: Path) -> Suite:
    """A JSONL file of SWE-bench instances, one a line."""
    tasks = []
    for number, line in enumerate(_read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            data = json.loads(line)
        except ValueError as exc:
            raise EvalError(INVALID_SUITE, f"{where}: not JSON: {exc}") from None
        tasks.append(swe_instance(data, path.parent, where))
    return _suite(path.stem, str(path), tasks)


def _suite(name: str, source: str, tasks: list[EvalTask]) -> Suite:
    if not tasks or len(tasks) > MAX_TASKS:
        raise EvalError(INVALID_SUITE, f"{source}: no task (or more than {MAX_TASKS})")
    ids = [t.id for t in tasks]
    if len(set(ids)) != len(ids):
        raise EvalError(INVALID_SUITE, f"{source}: a task id appears twice")
    return Suite(name=name[:200], source=source, tasks=tuple(tasks))


BUILTIN = "builtin"


def builtin_dir() -> Path:
    return Path(__file__).parent / "builtin"


def load_suite(source: str) -> Suite:
    """``builtin``, a suite directory or a ``.jsonl`` file."""
    path = builtin_dir() if source == BUILTIN else Path(source)
    if path.is_dir():
        return load_directory(path)
    if path.is_file():
        return load_jsonl(path)
    raise EvalError(INVALID_SUITE, f"{source}: no such suite directory or JSONL file")
