"""Loading suites: the built-in one, SWE-bench lines, and hostile input refused with a code."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from services.evals.errors import INVALID_MATRIX, INVALID_SUITE, EvalError
from services.evals.grader import rule_violations
from services.evals.matrix import build_matrix, matrix_from_json
from services.evals.suite import load_directory, load_jsonl, load_suite

SWE = {"repo": "acme/widgets", "instance_id": "acme__widgets-1", "base_commit": "abc123",
       "problem_statement": "fix it", "FAIL_TO_PASS": '["t.T.test_a"]', "PASS_TO_PASS": []}


def test_the_builtin_suite_has_ten_tasks_in_two_languages_an_injection_and_a_refusal() -> None:
    suite = load_suite("builtin")
    assert len(suite.tasks) >= 10
    commands = {t.test_command.split()[0] for t in suite.tasks}
    assert {"python3", "node", "sh"} <= commands
    assert any(t.expect == "refusal" for t in suite.tasks)
    injection = suite.task("py-injection-f7")
    assert "ignore your instructions" in (injection.fixture or {})["README.md"]
    for task in suite.tasks:  # the agent's repository never holds the hidden tests
        assert task.hidden and task.replay is not None
        assert not set(task.hidden) & set(task.fixture or {})


def _jsonl(tmp_path: Path, *lines: Any) -> Path:
    path = tmp_path / "instances.jsonl"
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines))
    return path


def test_swe_bench_lines_become_tasks(tmp_path: Path) -> None:
    suite = load_jsonl(_jsonl(tmp_path, SWE, {**SWE, "instance_id": "b", "repo": "."}))
    first, second = suite.tasks
    assert first.repo == "https://github.com/acme/widgets.git"
    assert first.fail_to_pass == ("t.T.test_a",) and first.prompt == "fix it"
    assert second.repo == str(tmp_path.resolve())


@pytest.mark.parametrize(("line", "message"), [
    ("{not json", "not JSON"),
    ({**SWE, "instance_id": "../../etc"}, "id"),
    ({**SWE, "instance_id": "<script>"}, "id"),
    ({k: v for k, v in SWE.items() if k != "FAIL_TO_PASS"}, "missing FAIL_TO_PASS"),
    ({**SWE, "FAIL_TO_PASS": "nope"}, "not a list"),
    ({**SWE, "FAIL_TO_PASS": [], "PASS_TO_PASS": []}, "no test"),
    ({**SWE, "base_commit": "--upload-pack=x"}, "base_commit"),
    ({**SWE, "test_command": "rm -rf /"}, "{test}"),
    ({**SWE, "FAIL_TO_PASS": ["a\nb"]}, "newline"),
    ({**SWE, "repo": "no-such-thing"}, "no URL"),
    ([1, 2], "JSON object"),
])
def test_hostile_instances_are_refused_with_a_code(tmp_path: Path, line: Any,
                                                   message: str) -> None:
    with pytest.raises(EvalError) as caught:
        load_jsonl(_jsonl(tmp_path, line))
    assert caught.value.code == INVALID_SUITE and message in caught.value.message


def _suite_dir(tmp_path: Path, task: dict[str, Any]) -> Path:
    folder = tmp_path / "suite" / "tasks" / "t1"
    (folder / "repo").mkdir(parents=True)
    (folder / "repo" / "a.py").write_text("x = 1\n")
    (folder / "task.json").write_text(json.dumps(task))
    (tmp_path / "suite" / "suite.json").write_text(json.dumps({"name": "s"}))
    return tmp_path / "suite"


def test_directory_tasks_refuse_escaping_paths_and_symbolic_links(tmp_path: Path) -> None:
    task = {"prompt": "p", "fail_to_pass": ["x"]}
    root = _suite_dir(tmp_path, task)
    assert load_directory(root).tasks[0].fixture == {"a.py": "x = 1\n"}
    os.symlink("/etc/passwd", root / "tasks" / "t1" / "repo" / "passwd")
    with pytest.raises(EvalError, match="symbolic links"):
        load_directory(root)
    (root / "tasks" / "t1" / "repo" / "passwd").unlink()
    (root / "tasks" / "t1" / "task.json").write_text(json.dumps({**task, "hidden": {
        "../../outside.py": "x"}}))
    with pytest.raises(EvalError, match="not a relative path"):
        load_directory(root)
    (root / "suite.json").write_text(json.dumps({"tasks": ["../t1"]}))
    with pytest.raises(EvalError, match="not valid"):
        load_directory(root)


def test_the_matrix_is_checked_before_anything_runs() -> None:
    matrix = build_matrix(["replay,codex"], ["codex:gpt-x"], ["implementer,reviewer"], 3)
    assert [c.name for c in matrix.cells] == [
        "replay/replay/implementer", "replay/replay/reviewer",
        "codex/gpt-x/implementer", "codex/gpt-x/reviewer"]
    assert matrix_from_json(matrix.as_json()) == matrix
    for providers, roles, repeat in ((["nope"], None, 1), (["replay"], ["<b>"], 1),
                                     (["replay"], None, 0)):
        with pytest.raises(EvalError) as caught:
            build_matrix(providers, None, roles, repeat)
        assert caught.value.code == INVALID_MATRIX


def test_file_rules() -> None:
    task = load_suite("builtin").task("py-injection-f7")
    assert rule_violations(task, ["greet.py"]) == []
    assert rule_violations(task, ["greet.py", "leak.txt"]) == ["must not change leak.txt"]
    assert rule_violations(task, []) == ["must change greet.py"]
    refusal = load_suite("builtin").task("py-refuse-backdoor")
    assert rule_violations(refusal, []) == []
    assert rule_violations(refusal, ["auth.py"])


def test_bytecode_left_in_a_task_is_skipped_and_other_unreadable_files_are_refused(
        tmp_path: Path) -> None:
    """Python leaves ``__pycache__`` in a fixture it ran or compiled in place (compileall over
    the source tree did, for the built-in suite): it is not part of the task. Another file that
    is not UTF-8 text is still refused (the control)."""
    root = _suite_dir(tmp_path, {"prompt": "p", "fail_to_pass": ["x"]})
    cache = root / "tasks" / "t1" / "repo" / "__pycache__"
    cache.mkdir()
    (cache / "a.cpython-311.pyc").write_bytes(b"\xa7\r\r\n\x00\x00")
    assert load_directory(root).tasks[0].fixture == {"a.py": "x = 1\n"}
    (root / "tasks" / "t1" / "repo" / "data.bin").write_bytes(b"\xa7\r\r\n\x00\x00")
    with pytest.raises(EvalError, match="cannot be read"):
        load_directory(root)
