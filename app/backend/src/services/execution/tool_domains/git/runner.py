"""The one way the harness runs git: hardened against the repository it works on.

The harness's own git runs outside the command sandbox, on a repository whose content (and, on a
crafted clone, whose ``.git/config``) it does not control. :func:`run_git` therefore

* builds the environment from scratch: a fixed ``PATH``, ``LANG=C.UTF-8``, an empty ``HOME`` that
  is not the user's, no system or global config (``GIT_CONFIG_NOSYSTEM=1``,
  ``GIT_CONFIG_GLOBAL=/dev/null``), no prompts (``GIT_TERMINAL_PROMPT=0``, an empty
  ``GIT_ASKPASS``), no editor, literal pathspecs, no optional locks, discovery stopped at the
  workspace, and the author and committer identity of the execution;
* overrides, on the command line (which wins over the repository's config), everything in the
  repository's config that could run a program or weaken the transport: hooks
  (``core.hooksPath=/dev/null``), fsmonitor, pager, credential helpers, signing programs,
  redirects, TLS verification; only the
  ``https``, ``http`` and ``file`` transports are allowed (never ``ext``, ``ssh`` or ``git``);
* pins the repository to the workspace: ``GIT_DIR=<workspace>/.git`` and
  ``GIT_WORK_TREE=<workspace>`` (the environment wins over ``core.worktree`` and a ``.git`` file),
  so a planted ``core.worktree`` cannot make the harness read or write outside; a ``.git`` that is
  a symlink or a file is refused (see :func:`pinned_repository`);
* neutralizes every clean/smudge/process filter driver the repository's config declares, since
  ``.gitattributes`` in the worktree could select one;
* kills the whole process group on timeout;
* translates a failure once, into ``ToolFailure`` (``git_error``, ``push_rejected`` or
  ``auth_failed``) whose details carry the trimmed stderr with secrets redacted.

Callers still pass ``--no-ext-diff --no-textconv`` to diff, show and log (see :data:`DIFF_SAFE`),
and ``--receive-pack``/``--upload-pack`` to push and fetch: ``remote.<name>.receivepack`` keeps
its *first* value, so a command-line ``-c`` cannot override the repository's.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from services.execution.errors import ConfigError, ErrorCode, ToolFailure
from services.execution.tool_domains.context import DEFAULT_GIT_EMAIL, DEFAULT_GIT_NAME
from services.execution.tool_domains.git.redact import redact, secrets_from_env

DEFAULT_TIMEOUT_S = 120.0
STDERR_CAP_CHARS = 4000
SAFE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
DIFF_SAFE = ("--no-ext-diff", "--no-textconv", "--no-color")

HARDENING_CONFIG: tuple[tuple[str, str], ...] = (
    ("core.hooksPath", "/dev/null"),
    ("core.fsmonitor", "false"),
    ("core.pager", "cat"),
    ("core.askPass", ""),
    ("credential.helper", ""),
    ("http.followRedirects", "false"),
    ("http.sslVerify", "true"),
    ("protocol.allow", "never"),
    ("protocol.https.allow", "always"),
    ("protocol.http.allow", "always"),
    ("protocol.file.allow", "always"),
    ("protocol.ext.allow", "never"),
    ("commit.gpgSign", "false"),
    ("tag.gpgSign", "false"),
    ("push.gpgSign", "false"),
    ("log.showSignature", "false"),
    ("gpg.program", "false"),
    ("user.useConfigOnly", "false"),
    ("submodule.recurse", "false"),
    ("fetch.recurseSubmodules", "false"),
    ("push.recurseSubmodules", "no"),
    ("gc.auto", "0"),
    ("maintenance.auto", "false"),
    ("color.ui", "false"),
)

# GIT_INDEX_FILE: the harness's checkpoints stage the worktree into a temporary index.
_ALLOWED_EXTRA = re.compile(r"^(GIT_CONFIG_(COUNT|KEY_\d+|VALUE_\d+)|GIT_INDEX_FILE)$")
_FILTER_KEY = re.compile(r"^filter\.(.+)\.(clean|smudge|process|required)$", re.IGNORECASE)
# Commands that read refs or objects only: no worktree filter can run, no scan needed.
_NO_FILTER_COMMANDS = frozenset(
    {"config", "rev-parse", "symbolic-ref", "for-each-ref", "check-ref-format", "show-ref", "log",
     "remote", "cat-file", "ls-remote"}
)
_AUTH_MARKERS = (
    "authentication failed", "could not read username", "could not read password",
    "terminal prompts disabled", "returned error: 401", "returned error: 403",
    "http 401", "http 403", "permission denied", "invalid credentials",
)
_REJECT_MARKERS = ("[rejected]", "[remote rejected]", "failed to push some refs",
                   "non-fast-forward")
_TRANSIENT_MARKERS = ("could not resolve host", "failed to connect", "connection timed out",
                      "connection reset", "timed out", "returned error: 5")

_home_lock = threading.Lock()
_home_dir: Path | None = None


@dataclass(frozen=True)
class GitAuthor:
    """The identity commits are authored and committed with."""

    name: str = DEFAULT_GIT_NAME
    email: str = DEFAULT_GIT_EMAIL


@dataclass(frozen=True)
class GitResult:
    """What one git process answered."""

    returncode: int
    stdout: bytes
    stderr: str

    @property
    def text(self) -> str:
        """stdout decoded (invalid UTF-8 replaced), for output shown to a model."""
        return self.stdout.decode("utf-8", "replace")


def git_binary() -> str:
    """The absolute path of git (found once on the fixed PATH)."""
    found = shutil.which("git", path=SAFE_PATH)
    if found is None:
        raise ConfigError("git is not installed", code=ErrorCode.CONFIG_ERROR)
    return found


def empty_home() -> Path:
    """An empty directory, private to this process, used as ``HOME`` for git."""
    global _home_dir
    with _home_lock:
        if _home_dir is None or not _home_dir.is_dir():
            _home_dir = Path(tempfile.mkdtemp(prefix="studio-git-home-"))
            _home_dir.chmod(0o500)
        return _home_dir


def build_env(workspace: Path, author: GitAuthor,
              env_extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The complete environment of one git process (nothing inherited)."""
    home = str(empty_home())
    env = {
        "PATH": f"{Path(git_binary()).parent}:{SAFE_PATH}",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "HOME": home,
        "XDG_CONFIG_HOME": home,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_ATTR_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_ASKPASS": "",
        "GIT_EDITOR": "true",
        "GIT_SEQUENCE_EDITOR": "true",
        "GIT_PAGER": "cat",
        "GIT_OPTIONAL_LOCKS": "0",
        "GIT_LITERAL_PATHSPECS": "1",
        "GIT_NO_REPLACE_OBJECTS": "1",
        "GIT_CEILING_DIRECTORIES": str(workspace.parent),
        "GIT_AUTHOR_NAME": author.name,
        "GIT_AUTHOR_EMAIL": author.email,
        "GIT_COMMITTER_NAME": author.name,
        "GIT_COMMITTER_EMAIL": author.email,
    }
    for key, value in (env_extra or {}).items():
        if not _ALLOWED_EXTRA.match(key):
            raise ConfigError(f"git environment may only add GIT_CONFIG_* variables "
                              f"(and GIT_INDEX_FILE), not {key}")
        env[key] = value
    return env


# Commands that make a repository (none to pin yet) or name theirs with --git-dir.
_UNPINNED_COMMANDS = frozenset({"init", "clone", "--git-dir"})


def pinned_repository(workspace: Path) -> dict[str, str]:
    """``GIT_DIR`` and ``GIT_WORK_TREE`` for a workspace with a ``.git`` directory.

    None for a directory without ``.git`` (a bare repository, a clone's parent). A ``.git`` that is
    a symlink or a gitfile would let whoever wrote it point the harness's git anywhere: refused.
    """
    dot_git = workspace / ".git"
    try:
        mode = os.lstat(dot_git).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return {}
    if not stat.S_ISDIR(mode):
        raise ToolFailure(ErrorCode.GIT_ERROR,
                          "the workspace's .git is not a directory (a link or a gitfile); "
                          "the harness's git does not follow it",
                          details={"path": ".git"})
    return {"GIT_DIR": str(dot_git), "GIT_WORK_TREE": str(workspace)}


def _config_flags(pairs: Sequence[tuple[str, str]]) -> list[str]:
    flags: list[str] = []
    for key, value in pairs:
        flags += ["-c", f"{key}={value}"]
    return flags


def repository_config_names(workspace: Path, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> list[str]:
    """Names of the config keys the repository itself sets (its local, worktree and included
    files; the system and global files are never read)."""
    env = build_env(workspace, GitAuthor())
    env.update(pinned_repository(workspace))
    args = ["config", "--list", "--show-scope", "--name-only", "-z"]
    listing = _spawn([git_binary(), "-C", str(workspace), "-c", f"safe.directory={workspace}",
                      *args], env, timeout_s, None)
    if listing.returncode != 0:  # fail closed: no listing, no git call that would need it
        raise git_failure(listing, args, ())
    fields = listing.stdout.decode("utf-8", "replace").split("\0")
    return [name for scope, name in zip(fields[::2], fields[1::2], strict=False)
            if scope != "command" and name]


def _filter_overrides(workspace: Path, timeout_s: float) -> list[str]:
    """``-c`` flags that disable every filter driver the repository's own config declares."""
    drivers: dict[str, None] = {}
    for name in repository_config_names(workspace, timeout_s=timeout_s):
        match = _FILTER_KEY.match(name.strip())
        if match:
            drivers[match.group(1)] = None
    pairs: list[tuple[str, str]] = []
    for driver in drivers:
        pairs += [(f"filter.{driver}.{k}", "") for k in ("clean", "smudge", "process")]
        pairs.append((f"filter.{driver}.required", "false"))
    return _config_flags(pairs)


def _spawn(argv: list[str], env: Mapping[str, str], timeout_s: float,
           stdin: bytes | None) -> GitResult:
    proc = subprocess.Popen(  # noqa: S603 - argv is a list built by the harness, no shell
        argv, env=dict(env), stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True, close_fds=True,
    )
    try:
        out, err = proc.communicate(input=stdin, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise ToolFailure(ErrorCode.GIT_ERROR, f"git timed out after {timeout_s:g}s",
                          details={"timed_out": True}, retryable=True) from None
    return GitResult(proc.returncode, out, err.decode("utf-8", "replace"))


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()


def run_git(
    workspace: Path,
    args: Sequence[str],
    *,
    env_extra: Mapping[str, str] | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    check: bool = True,
    author: GitAuthor | tuple[str, str] = GitAuthor(),
    stdin: bytes | None = None,
) -> GitResult:
    """Run ``git <args>`` in ``workspace``, hardened; raise a translated ``ToolFailure`` on failure
    when ``check`` (the default)."""
    if isinstance(author, tuple):
        author = GitAuthor(*author)
    env = build_env(workspace, author, env_extra)
    if not args or args[0] not in _UNPINNED_COMMANDS:
        env.update(pinned_repository(workspace))
    argv = [git_binary(), "--no-pager", "-C", str(workspace), *_config_flags(HARDENING_CONFIG),
            "-c", f"safe.directory={workspace}"]
    if args and args[0] not in _NO_FILTER_COMMANDS:
        argv += _filter_overrides(workspace, timeout_s)
    argv += list(args)
    result = _spawn(argv, env, timeout_s, stdin)
    if check and result.returncode != 0:
        raise git_failure(result, args, secrets_from_env(env_extra or {}))
    return result


def git_failure(result: GitResult, args: Sequence[str], secrets: Sequence[str]) -> ToolFailure:
    """The one translation of a failed git process into a tool failure (secrets redacted)."""
    stderr = redact(result.stderr.strip(), secrets)
    if len(stderr) > STDERR_CAP_CHARS:
        stderr = "[...]" + stderr[-STDERR_CAP_CHARS:]
    lowered = stderr.lower()
    command = args[0] if args else ""
    code, retryable = ErrorCode.GIT_ERROR, False
    if command in ("push", "fetch", "ls-remote") and any(m in lowered for m in _AUTH_MARKERS):
        code = ErrorCode.AUTH_FAILED
    elif command == "push" and any(m in lowered for m in _REJECT_MARKERS):
        code = ErrorCode.PUSH_REJECTED
    elif any(m in lowered for m in _TRANSIENT_MARKERS):
        retryable = True
    summary = _summary(stderr) or f"git {command} exited with {result.returncode}"
    details: dict[str, Any] = {
        "command": f"git {command}".strip(),
        "args": [redact(a, secrets) for a in args],
        "exit_code": result.returncode,
        "stderr": stderr,
    }
    return ToolFailure(code, summary, details=details, retryable=retryable)


def _summary(stderr: str) -> str:
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    for line in lines:
        if line.startswith(("fatal:", "error:")):
            return line[:300]
    return lines[-1][:300] if lines else ""
