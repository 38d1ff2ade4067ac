"""A SWE-bench-format JSONL of three instances, built here from local bare repositories (a real
history: a working first commit, then a commit that plants a bug; a real test), run by ``studio
eval run`` in a matrix of the codex and gemini providers (the real openai and google-genai SDKs,
over HTTP, against the scripted model server) and graded by running FAIL_TO_PASS (from the
instance's ``test_patch``, which the agent never sees) and PASS_TO_PASS. The third agent fixes
its bug and breaks a test that passed: it is unresolved, and names that test."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from tests.integration.evals.eval_env import (
    OPENAI_KEY,
    eval_env,
    report,
    studio,
)
from tests.support.git_http_server import GIT_ENV
from tests.support.model_requests import RequestRecord, tool_results
from tests.support.model_script import Reply, Usage, text, tool_calls
from tests.support.model_server import ScriptedModelServer

GOOD = "def double(x):\n    return x * 2\n\n\ndef square(x):\n    return x * x\n"
PLANTED = "def double(x):\n    return x * 3\n\n\ndef square(x):\n    return x * x\n"
BASE_TEST = ("import unittest\n\nfrom calc import square\n\n\nclass Base(unittest.TestCase):\n"
             "    def test_square(self):\n        self.assertEqual(square(3), 9)\n")
FIX_TEST = ("import unittest\n\nfrom calc import double\n\n\nclass Fix(unittest.TestCase):\n"
            "    def test_double(self):\n        self.assertEqual(double(4), 8)\n")
# what the scripted model writes for each instance (gamma's fix loses square())
FIXES = {"alpha": GOOD, "beta": GOOD, "gamma": "def double(x):\n    return x * 2\n"}
CELLS = ("codex/gpt-5.1/-", "gemini/gemini-2.5-pro/-")  # the openai and google-genai SDKs
DONE = json.dumps({"status": "success", "summary": "fixed double()", "changes": ["calc.py"],
                   "issues": [], "questions": []})


def _git(cwd: Path, *args: str) -> str:
    env = {**GIT_ENV, "HOME": str(cwd), "GIT_AUTHOR_NAME": "Dev", "GIT_AUTHOR_EMAIL": "d@x.invalid",
           "GIT_COMMITTER_NAME": "Dev", "GIT_COMMITTER_EMAIL": "d@x.invalid"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True,
                          text=True).stdout.strip()


def _instance(root: Path, name: str) -> dict[str, Any]:
    """A bare repository with history, its base commit (the planted bug) and the test patch."""
    work = root / f"{name}-work"
    work.mkdir()
    _git(work, "init", "-q", "-b", "main")
    (work / "calc.py").write_text(GOOD)
    (work / "test_base.py").write_text(BASE_TEST)
    _git(work, "add", ".")
    _git(work, "commit", "-q", "-m", "calc with tests")
    (work / "calc.py").write_text(PLANTED)
    _git(work, "commit", "-qam", "speed up double()")  # the planted bug
    base = _git(work, "rev-parse", "HEAD")
    _git(work, "clone", "-q", "--bare", str(work), str(root / f"{name}.git"))
    (work / "test_fix.py").write_text(FIX_TEST)  # the hidden test: only in test_patch
    _git(work, "add", "test_fix.py")
    patch = _git(work, "diff", "--cached", base) + "\n"
    return {"repo": f"{name}.git", "instance_id": f"acme__calc-{name}", "base_commit": base,
            "problem_statement": f"[{name}] double(4) answers 12, it should answer 8.",
            "FAIL_TO_PASS": json.dumps(["test_fix.Fix.test_double"]),
            "PASS_TO_PASS": json.dumps(["test_base.Base.test_square"]), "test_patch": patch,
            "version": "1.0", "created_at": "2026-11-28T00:00:00Z"}


def _model(record: RequestRecord) -> Reply:
    """The agent, whichever SDK asks: a write of its fix, then the final answer once the
    write's result is back."""
    body = record.raw_body.decode()
    if tool_results(record):
        return text(DONE, usage=Usage(input_tokens=300, output_tokens=40))
    name = next(n for n in FIXES if f"[{n}]" in body)
    return tool_calls([("workspace_write_file", {"path": "calc.py", "content": FIXES[name]})],
                      usage=Usage(input_tokens=200, output_tokens=30))


def test_swe_bench_instances_are_graded_by_fail_to_pass_and_pass_to_pass(
        tmp_path: Path) -> None:
    instances = [_instance(tmp_path, name) for name in FIXES]
    jsonl = tmp_path / "instances.jsonl"
    jsonl.write_text("".join(json.dumps(i) + "\n" for i in instances))
    with ScriptedModelServer([_model] * 60) as server:
        env = eval_env(f"sqlite:///{tmp_path / 'studio.db'}", tmp_path / "home", server.url)
        env.update(GOOGLE_GEMINI_BASE_URL=server.url, GEMINI_API_KEY=OPENAI_KEY)
        data = report(studio(env, "eval", "run", str(jsonl), "--provider", "codex,gemini",
                             "--model", "codex:gpt-5.1", "--concurrency", "3", "--json"))
        bodies = [r.raw_body.decode() for r in server.requests]
    both = ["test_fix.Fix.test_double", "test_base.Base.test_square"]
    assert [c["cell"] for c in data["cells"]] == list(CELLS)
    for cell in data["cells"]:
        assert (cell["graded"], cell["resolved"]) == (3, 2), cell
    for item in data["items"]:
        assert item["turns"] == 2 and item["input_tokens"] == 500, item
        if item["task_id"] == "acme__calc-gamma":
            assert item["resolved"] is False
            assert item["tests_passed"] == ["test_fix.Fix.test_double"]
            assert item["tests_failed"] == ["test_base.Base.test_square"]
        else:
            assert item["resolved"] is True and item["tests_passed"] == both, item
    # the agent never saw the hidden test: not in any request (its file or its body)
    assert len(bodies) == 6 * len(CELLS)
    assert not any("test_fix" in b or "Fix(unittest" in b for b in bodies)
    # positive control: the prompts did reach the model
    assert sum("[gamma]" in b for b in bodies) == 2 * len(CELLS)
    # nor did its repository hold it: every path in every ref of the eval's copy it cloned
    bare = tmp_path / "home" / "data" / "evals" / data["id"] / "acme__calc-gamma.git"
    paths = set(_git(bare, "log", "--all", "--name-only", "--format=").split())
    assert paths == {"calc.py", "test_base.py"}
