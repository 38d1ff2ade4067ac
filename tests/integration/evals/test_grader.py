"""The grader on a hostile change: a diff that links a directory out of the checkout cannot make
a hidden test file be written through it; the same hidden test, without the link, grades the
change (the positive control). A credential in a repository URL never reaches an error."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from services.evals.errors import EvalError
from services.evals.fixtures import prepare_repo
from services.evals.gitops import git
from services.evals.grader import Grader
from services.evals.suite import EvalTask
from tests.support.exfil_listener import TcpWitness
from tests.support.settings import studio_settings

HIDDEN = {"checks/test_value.py": "import unittest\n\nimport value\n\n\n"
                                  "class T(unittest.TestCase):\n    def test_value(self):\n"
                                  "        self.assertEqual(value.VALUE, 1)\n"}


def _task() -> EvalTask:
    return EvalTask(id="linked", prompt="p", fixture={"value.py": "VALUE = 0\n"},
                    hidden=HIDDEN, test_command="python3 -m unittest -q {test}",
                    fail_to_pass=("checks.test_value.T.test_value",))


def _push_change(bare: Path, work: Path, link_to: Path | None) -> str:
    """What an execution pushes: the fix, and (hostile) ``checks`` as a link to ``link_to``."""
    git("clone", "-q", str(bare), str(work), cwd=bare.parent, home=work.parent)
    (work / "value.py").write_text("VALUE = 1\n")
    if link_to is not None:
        os.symlink(link_to, work / "checks")
    git("add", "-A", cwd=work, home=work.parent)
    git("commit", "-qm", "change", cwd=work, home=work.parent)
    git("push", "-q", "origin", "HEAD:refs/heads/agent", cwd=work, home=work.parent)
    return git("rev-parse", "HEAD", cwd=work, home=work.parent).decode().strip()


@pytest.mark.sandbox
def test_hidden_tests_are_never_written_through_a_link_of_the_agent(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    grader = Grader(studio_settings(tmp_path / "data"))
    repo = prepare_repo(_task(), tmp_path / "repos")
    hostile = grader.grade(_task(), repo, _push_change(repo.bare, tmp_path / "w1", outside))
    assert not hostile.resolved and hostile.error_code == "path_outside_workspace"
    assert list(outside.iterdir()) == []  # the witness: nothing was written there
    clean_repo = prepare_repo(_task().model_copy(update={"id": "clean"}), tmp_path / "repos")
    clean = grader.grade(_task(), clean_repo, _push_change(clean_repo.bare, tmp_path / "w2",
                                                           None))
    assert clean.resolved and clean.passed == ["checks.test_value.T.test_value"]
    assert clean.changed == ["value.py"]


def test_a_repository_credential_stays_out_of_the_error(tmp_path: Path) -> None:
    task = EvalTask(id="cred", prompt="p", repo="https://user:ghp_SECRET123@127.0.0.1:9/x.git",
                    base_commit="abcd", fail_to_pass=("t",))
    with pytest.raises(EvalError) as caught:
        prepare_repo(task, tmp_path / "repos")
    assert caught.value.code == "fixture_failed"
    assert "ghp_SECRET123" not in str(caught.value) and "127.0.0.1" in str(caught.value)


@pytest.mark.sandbox
def test_setup_runs_before_the_tests_with_the_setup_phase_network_rules(tmp_path: Path) -> None:
    """The task's setup command runs in the fresh checkout before the tests; its network is the
    setup phase's: a host not on the allowlist (a local listener) receives nothing, with the
    listener's address allowed (the positive control) it receives the request."""
    with TcpWitness() as witness:
        host_port = witness.url.split("//", 1)[1].rstrip("/")
        probe = ("python3 -c \"import urllib.request, sys; "
                 f"urllib.request.urlopen('{witness.url}/probe', timeout=10)\" || true; "
                 "echo VALUE = 1 > value.py")
        task = _task().model_copy(update={"setup": (probe,)})
        grader = Grader(studio_settings(tmp_path / "data", setup_allowlist=[]))
        refused = grader.grade(task, prepare_repo(task, tmp_path / "r1"), None)
        assert refused.resolved  # the setup ran (value.py) before the test
        assert witness.received() == b""  # the witness: no request reached the listener
        allowed = Grader(studio_settings(tmp_path / "data", setup_allowlist=[host_port]))
        assert allowed.grade(task, prepare_repo(task, tmp_path / "r2"), None).resolved
        assert b"/probe" in witness.received()
