"""The harness's git is hardened against the repository it works on, and against its arguments.

Each planted program writes a marker outside the workspace; the harness's git must never run it.
Every test also runs plain git once as a control, proving the planted program really would run.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from services.execution.errors import ConfigError, ToolFailure
from services.execution.tool_domains.git.redact import REDACTED, redact, secrets_from_env
from services.execution.tool_domains.git.runner import run_git
from tests.support.git_http_reject import rejecting_host, silent_listener
from tests.unit.execution.git_helpers import (
    AGENT_BRANCH,
    TOKEN,
    RecordingPullRequests,
    Repo,
    TokenAuth,
    call,
    context,
    error_code,
    executable,
    make_repo,
    ok,
    sh,
)

HOOKS = ("pre-commit", "prepare-commit-msg", "commit-msg", "post-commit", "pre-push",
         "post-checkout", "reference-transaction", "pre-auto-gc", "post-index-change")


@pytest.fixture
def repo(workspace: Path) -> Repo:
    return make_repo(workspace)


def _marker_script(path: Path, marker: Path, tail: str = "") -> Path:
    return executable(path, f"#!/bin/sh\ntouch '{marker}'\n{tail}")


def _markers(repo: Repo) -> set[str]:
    return {name for name in repo.outside_names() if name.startswith("ran-")}


def _work_and_push(repo: Repo) -> None:
    ctx = context(repo.ws)
    ok(call(ctx, "create_branch", name=AGENT_BRANCH))
    (repo.ws / "a.txt").write_text("some text\n")
    ok(call(ctx, "status"))
    ok(call(ctx, "add"))
    ok(call(ctx, "diff", staged=True))
    ok(call(ctx, "commit", message="work"))
    ok(call(ctx, "push"))
    ok(call(ctx, "log"))
    ok(call(ctx, "show", ref="HEAD"))


def test_hooks_in_the_repository_never_run(repo: Repo) -> None:
    for hook in HOOKS:
        _marker_script(repo.ws / ".git" / "hooks" / hook, repo.outside / f"ran-{hook}")
    _work_and_push(repo)
    assert _markers(repo) == set()
    assert repo.remote_log(AGENT_BRANCH)[0].endswith("\twork")
    sh(repo.ws, "commit", "--quiet", "--allow-empty", "-m", "control")  # plain git runs them
    assert {"ran-pre-commit", "ran-post-commit"} <= _markers(repo)


def test_hooks_path_and_fsmonitor_in_repository_config_are_ignored(repo: Repo) -> None:
    hooks = repo.outside / "hooks"
    for hook in HOOKS:
        _marker_script(hooks / hook, repo.outside / f"ran-{hook}")
    fsmonitor = _marker_script(repo.outside / "fsmonitor.sh", repo.outside / "ran-fsmonitor")
    sh(repo.ws, "config", "core.hooksPath", str(hooks))
    sh(repo.ws, "config", "core.fsmonitor", str(fsmonitor))
    _work_and_push(repo)
    assert _markers(repo) == set()
    sh(repo.ws, "status", "--porcelain")  # control: plain git runs both
    sh(repo.ws, "commit", "--quiet", "--allow-empty", "-m", "control")
    assert {"ran-fsmonitor", "ran-pre-commit"} <= _markers(repo)


def test_filters_diff_drivers_and_transport_programs_in_config_are_ignored(repo: Repo) -> None:
    out = repo.outside
    clean = _marker_script(out / "clean.sh", out / "ran-clean", "tr a-z A-Z\n")
    textconv = _marker_script(out / "textconv.sh", out / "ran-textconv", 'cat "$1"\n')
    external = _marker_script(out / "external.sh", out / "ran-external")
    receive = _marker_script(out / "receive.sh", out / "ran-receivepack",
                             'exec git-receive-pack "$@"\n')
    upload = _marker_script(out / "upload.sh", out / "ran-uploadpack",
                            'exec git-upload-pack "$@"\n')
    for key, value in [("filter.evil.clean", clean), ("filter.evil.smudge", clean),
                       ("filter.evil.required", "true"), ("diff.evil.textconv", textconv),
                       ("diff.external", external), ("remote.origin.receivepack", receive),
                       ("remote.origin.uploadpack", upload),
                       ("core.pager", external), ("gpg.program", external),
                       ("commit.gpgSign", "true"), ("credential.helper", external)]:
        sh(repo.ws, "config", key, str(value))
    (repo.ws / ".gitattributes").write_text("*.txt filter=evil diff=evil\n")
    (repo.ws / "b.txt").write_text("lower case\n")
    sh(repo.ws, "add", "--", ".gitattributes")
    _work_and_push(repo)
    ok(call(context(repo.ws), "diff", ref="HEAD~1"))
    ok(call(context(repo.ws), "fetch"))
    assert _markers(repo) == set()
    blob = sh(repo.ws, "cat-file", "-p", "HEAD:a.txt")
    assert blob == "some text\n"  # committed as written: no clean filter ran
    # control: plain git runs the filter (b.txt changed first, so its stat cannot match the
    # index the harness wrote and git must hash it again: racy-git timing decides otherwise)
    (repo.ws / "b.txt").write_text("changed lower case\n")
    sh(repo.ws, "add", "b.txt")
    sh(repo.ws, "diff", "--cached", "HEAD")
    sh(repo.ws, "diff", "--no-ext-diff", "--cached", "HEAD")
    sh(repo.ws, "fetch", "--quiet")
    sh(repo.ws, "push", "--quiet", "--no-verify", "origin", "HEAD:refs/heads/control")
    assert {"ran-clean", "ran-textconv", "ran-external", "ran-uploadpack",
            "ran-receivepack"} <= _markers(repo)


def test_user_global_config_and_home_are_ignored(
    repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hooks = repo.outside / "global-hooks"
    _marker_script(hooks / "pre-commit", repo.outside / "ran-global-pre-commit")
    global_config = tmp_path / "global.gitconfig"
    global_config.write_text(f"[core]\n\thooksPath = {hooks}\n[user]\n\tname = Global User\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(global_config))
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".gitconfig").write_text(global_config.read_text())
    _work_and_push(repo)
    assert _markers(repo) == set()
    assert repo.remote_log(AGENT_BRANCH)[0].split("\t")[1] == "Studio Agent"


def test_network_is_refused_when_repository_config_redirects_it(repo: Repo) -> None:
    sh(repo.ws, "config", f"url.{repo.outside}/evil.git.insteadOf", str(repo.bare))
    ctx = context(repo.ws)
    ok(call(ctx, "create_branch", name=AGENT_BRANCH))
    envelope = call(ctx, "push")
    assert error_code(envelope) == "git_error"
    assert envelope["error"]["details"]["config_keys"] == [
        f"url.{repo.outside}/evil.git.insteadof"]
    assert error_code(call(ctx, "fetch")) == "git_error"


def _injection_rows() -> list[tuple[str, dict[str, object], str]]:
    evil = "--upload-pack=touch OUT/pwn-upload"
    output = "--output=OUT/pwn-output"
    return [
        ("create_branch", {"name": "-D"}, "invalid_arguments"),
        ("create_branch", {"name": evil}, "invalid_arguments"),
        ("create_branch", {"name": "x", "start_point": output}, "invalid_arguments"),
        ("create_branch", {"name": "@{-1}"}, "invalid_arguments"),
        ("create_branch", {"name": "bad..name"}, "invalid_arguments"),
        ("create_branch", {"name": "HEAD"}, "invalid_arguments"),
        ("checkout", {"ref": "--orphan=pwn"}, "invalid_arguments"),
        ("checkout", {"ref": "-b"}, "invalid_arguments"),
        ("diff", {"ref": output}, "invalid_arguments"),
        ("diff", {"ref": f"HEAD..{output}"}, "invalid_arguments"),
        ("diff", {"paths": [output]}, "invalid_arguments"),
        ("diff", {"paths": [":(top)README.md"]}, "invalid_arguments"),
        ("diff", {"paths": ["../outside/secret.txt"]}, "path_outside_workspace"),
        ("log", {"ref": output}, "invalid_arguments"),
        ("show", {"ref": output}, "invalid_arguments"),
        ("fetch", {"ref": evil}, "invalid_arguments"),
        ("fetch", {"ref": "main:refs/heads/main"}, "invalid_arguments"),
        ("push", {"branch": "--receive-pack=touch OUT/pwn-receive"}, "invalid_arguments"),
        ("push", {"branch": "--force"}, "invalid_arguments"),
        ("add", {"paths": ["--chmod=+x"]}, "invalid_arguments"),
        ("add", {"paths": [":(top)../outside"]}, "invalid_arguments"),
        ("add", {"paths": [":!README.md"]}, "invalid_arguments"),
        ("add", {"paths": ["../outside/secret.txt"]}, "path_outside_workspace"),
        ("add", {"paths": ["OUT/secret.txt"]}, "path_outside_workspace"),
        ("add", {"paths": [".git/config"]}, "protected_path"),
        ("restore", {"paths": ["-f"]}, "invalid_arguments"),
        ("restore", {"paths": [".git/HEAD"]}, "protected_path"),
        ("create_pull_request", {"title": "t", "body": "b", "base": "--head=x"},
         "invalid_arguments"),
        ("commit", {"message": "m", "unknown": "--amend"}, "invalid_arguments"),
    ]


@pytest.mark.parametrize(
    ("operation", "args", "expected"), _injection_rows(),
    ids=[f"{op}-{next(iter(a.values()))}"[:60] for op, a, _ in _injection_rows()],
)
def test_argument_injection_is_refused(repo: Repo, operation: str, args: dict[str, object],
                                       expected: str) -> None:
    def expand(value: object) -> object:
        if isinstance(value, list):
            return [expand(v) for v in value]
        return value.replace("OUT", str(repo.outside)) if isinstance(value, str) else value

    ctx = context(repo.ws, pull_requests=RecordingPullRequests())
    ok(call(ctx, "create_branch", name=AGENT_BRANCH))
    (repo.ws / "README.md").write_text("changed\n")
    before = sh(repo.ws, "rev-parse", "HEAD", f"refs/heads/{AGENT_BRANCH}")
    envelope = call(ctx, operation, **{k: expand(v) for k, v in args.items()})
    assert error_code(envelope) == expected
    assert repo.outside_names() == {"secret.txt"}
    assert not list(repo.ws.rglob("pwn*"))
    assert sh(repo.ws, "rev-parse", "HEAD", f"refs/heads/{AGENT_BRANCH}") == before
    assert sh(repo.ws, "diff", "--cached", "--name-only") == ""
    assert not repo.remote_has(f"refs/heads/{AGENT_BRANCH}")


def test_rejected_credentials_are_auth_failed_and_redacted(repo: Repo) -> None:
    auth = TokenAuth()
    ctx = context(repo.ws, git_auth=auth)
    ok(call(ctx, "create_branch", name=AGENT_BRANCH))
    with rejecting_host() as host:
        sh(repo.ws, "remote", "set-url", "origin", host.url)
        pushed = call(ctx, "push")
        fetched = call(ctx, "fetch")
    assert error_code(pushed) == "auth_failed" and error_code(fetched) == "auth_failed"
    basic = base64.b64encode(f"x-access-token:{TOKEN}".encode()).decode()
    assert f"Basic {basic}" in host.authorizations  # sent as a header, scoped to the remote
    assert auth.urls == [host.url, host.url]
    text = json.dumps([pushed, fetched])
    assert TOKEN not in text and basic not in text
    assert TOKEN not in (repo.ws / ".git" / "config").read_text()


def test_a_hung_remote_times_out_and_is_retryable(repo: Repo) -> None:
    with silent_listener() as url, pytest.raises(ToolFailure) as caught:
        run_git(repo.ws, ["fetch", url], timeout_s=1.0)
    assert caught.value.code.value == "git_error"
    assert caught.value.details["timed_out"] is True and caught.value.retryable is True


def test_only_git_config_variables_may_be_added_to_the_environment(repo: Repo) -> None:
    with pytest.raises(ConfigError):
        run_git(repo.ws, ["status"], env_extra={"GIT_DIR": str(repo.outside)})


def test_a_directory_that_is_not_a_repository_does_not_reach_a_parent_repository(
    tmp_path: Path,
) -> None:
    sh(tmp_path, "init", "--quiet", "-b", "main", str(tmp_path))
    inner = tmp_path / "inner"
    inner.mkdir()
    with pytest.raises(ToolFailure) as caught:
        run_git(inner, ["status"])
    assert "not a git repository" in caught.value.message


def test_redaction_of_credential_shapes() -> None:
    basic = base64.b64encode(b"x-access-token:s3cr3t-value").decode()
    secrets = secrets_from_env({"GIT_CONFIG_KEY_0": "http.https://h/.extraHeader",
                                "GIT_CONFIG_VALUE_0": f"Authorization: Basic {basic}"})
    assert "s3cr3t-value" in secrets and basic in secrets
    text = (f"token s3cr3t-value; Authorization: Bearer abc.def; "
            f"https://user:pw@host/x.git ghp_{'a' * 36}")
    cleaned = redact(text, secrets)
    for leaked in ("s3cr3t-value", "abc.def", "user:pw", "ghp_"):
        assert leaked not in cleaned
    assert cleaned.count(REDACTED) == 4


def test_a_planted_core_worktree_does_not_move_the_harness_outside(repo: Repo) -> None:
    """``core.worktree`` in ``.git/config`` once made diff read, and restore write, outside."""
    planted = repo.outside / "README.md"
    planted.write_text("OUTSIDE-CONTENT\n")
    sh(repo.ws, "config", "core.worktree", str(repo.outside))
    assert "OUTSIDE-CONTENT" in sh(repo.ws, "diff")  # control: plain git goes there
    ctx = context(repo.ws)
    shown = ok(call(ctx, "diff"))
    assert "OUTSIDE-CONTENT" not in json.dumps(shown)
    (repo.ws / "README.md").write_text("changed inside\n")
    ok(call(ctx, "restore", paths=["README.md"]))
    assert planted.read_text() == "OUTSIDE-CONTENT\n"
    assert (repo.ws / "README.md").read_text() == "# demo\nline two\n"


@pytest.mark.parametrize("kind", ["symlink", "gitfile"])
def test_a_dot_git_that_is_not_a_directory_is_refused(repo: Repo, kind: str) -> None:
    real = repo.ws / ".git"
    moved = repo.outside / "moved.git"
    real.rename(moved)
    if kind == "symlink":
        real.symlink_to(moved)
    else:
        real.write_text(f"gitdir: {moved}\n")
    assert error_code(call(context(repo.ws), "status")) == "git_error"
