"""What a sandboxed command may see of the host: the allowlist of system paths.

Shared by the bubblewrap and Landlock sandboxes (:mod:`services.execution.sandbox`). Everything
not listed here is invisible (bubblewrap) or unreadable (Landlock): home directories, ``/root``,
``/tmp``, ``/var``, ``/srv``, ``/work``, other workspaces, ``/sys``, the host's ``/run``.

``/etc`` is not bound whole: only entries that ordinary tools need are (name resolution of users
and hosts, the dynamic loader cache, locales, time zones, CA certificates, ``alternatives``
symlinks), and inside those, anything that is not world-readable (``/etc/ssl/private``) is masked,
because the sandboxed process keeps the host uid and owner permissions would let it read them.
Package-manager credentials (``/etc/pip.conf``, ``/etc/npmrc``) are left out on purpose.

The Python toolchain that runs the harness (``sys.base_prefix`` and the virtualenv, when they
live outside ``/usr``, e.g. a pyenv under ``/root``) is bound read-only too, so ``python3`` and
``pytest`` work in the workspace.
"""

from __future__ import annotations

import functools
import os
import stat
import sys
from pathlib import Path

SANDBOX_UID = 65534  # "nobody" inside the command's user namespace, never 0
SANDBOX_GID = 65534
SYSTEM_SEARCH_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

SYSTEM_DIRS: tuple[str, ...] = (
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
)

ETC_ALLOWLIST: tuple[str, ...] = (
    "alternatives", "bash.bashrc", "ca-certificates", "ca-certificates.conf", "debian_version",
    "environment", "gai.conf", "gitconfig", "group", "host.conf", "hostname", "hosts", "inputrc",
    "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "locale.alias", "locale.conf", "localtime",
    "magic", "magic.mime", "mime.types", "networks", "nsswitch.conf", "os-release", "passwd",
    "profile", "protocols", "python3", "python3.11", "python3.12", "python3.13", "resolv.conf",
    "services", "shells", "ssl", "terminfo", "timezone",
)


def _is_under_system_dirs(path: Path) -> bool:
    return any(path == Path(d) or Path(d) in path.parents for d in SYSTEM_DIRS)


@functools.lru_cache(maxsize=1)
def toolchain_dirs() -> tuple[Path, ...]:
    """Real prefixes of the running Python (base installation and venv) outside ``/usr``."""
    found: list[Path] = []
    for prefix in (sys.base_prefix, sys.prefix):
        real = Path(os.path.realpath(prefix))
        if real.is_dir() and not _is_under_system_dirs(real) and real not in found:
            found.append(real)
    return tuple(found)


def sandbox_python() -> str:
    """The Python executable to start inside a sandbox (with ``-I -S``: no site-packages needed):
    the base installation's, symlinks resolved. A venv's own ``bin/python`` may live where the
    sandbox mounts a fresh ``/tmp`` (a checkout under ``/tmp``), so it is not used."""
    base = getattr(sys, "_base_executable", None) or sys.executable
    return os.path.realpath(base)


def etc_entries() -> list[Path]:
    """The allowlisted ``/etc`` entries that exist on this host."""
    return [Path("/etc", name) for name in ETC_ALLOWLIST if os.path.lexists(Path("/etc", name))]


def readable_system_paths() -> list[Path]:
    """Every host path a command may read (and execute from), symlinks resolved."""
    paths = [Path(d) for d in SYSTEM_DIRS if os.path.isdir(d)]
    paths += etc_entries()
    paths += list(toolchain_dirs())
    return [p for p in paths if os.path.exists(p)]


def _private_entries(top: Path) -> list[tuple[Path, bool]]:
    """Entries under ``top`` that are not world-readable: ``(path, is_dir)``, not descended."""
    found: list[tuple[Path, bool]] = []
    pending = [top]
    while pending:
        current = pending.pop()
        try:
            st = os.lstat(current)
        except OSError:
            continue
        if stat.S_ISLNK(st.st_mode):
            continue
        if stat.S_ISDIR(st.st_mode):
            if st.st_mode & (stat.S_IROTH | stat.S_IXOTH) != (stat.S_IROTH | stat.S_IXOTH):
                found.append((current, True))
                continue
            try:
                pending.extend(current / name for name in os.listdir(current))
            except OSError:
                found.append((current, True))
        elif not st.st_mode & stat.S_IROTH:
            found.append((current, False))
    return found


def _bind_system_dir(path: str) -> list[str]:
    if os.path.islink(path):
        return ["--symlink", os.readlink(path), path]
    if os.path.isdir(path):
        return ["--ro-bind", path, path]
    return []


def bwrap_system_args(tmp_bytes: int) -> list[str]:
    """Namespace flags and the read-only system layout (computed once per sandbox)."""
    args = [
        "--unshare-all", "--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_GID),
        "--die-with-parent", "--new-session", "--cap-drop", "ALL",
    ]
    for path in SYSTEM_DIRS:
        args += _bind_system_dir(path)
    for entry in etc_entries():
        if os.path.exists(entry):  # a dangling symlink cannot be bound
            args += ["--ro-bind", str(entry), str(entry)]
            for private, is_dir in _private_entries(entry):
                if is_dir:
                    args += ["--tmpfs", str(private), "--remount-ro", str(private)]
                else:
                    args += ["--ro-bind", "/dev/null", str(private)]
    for tool in toolchain_dirs():
        args += ["--ro-bind", str(tool), str(tool)]
    args += [
        "--dev", "/dev", "--proc", "/proc",
        # bubblewrap leaves these writable; the kernel checks only the host uid on sysctls.
        "--ro-bind", "/proc/sys", "/proc/sys",
        "--ro-bind-try", "/proc/sysrq-trigger", "/proc/sysrq-trigger",
        # Sized: an unsized tmpfs may take half the host's RAM, each.
        "--size", str(tmp_bytes), "--tmpfs", "/tmp",
        "--size", str(tmp_bytes), "--tmpfs", "/var/tmp", "--dir", "/tmp/home",
    ]
    return args


def borrowed_object_dirs(workspace: Path) -> list[Path]:
    """The object directories the workspace's clone borrows (``.git/objects/info/alternates``,
    written by the harness's clone from the mirror cache): absolute, existing directories named
    ``objects``. A ``.git`` that is a symlink is not followed. Commands may read them (so ``git
    log`` in a command sees the history) but never write them: see :func:`bwrap_workspace_args`
    and the Landlock rules."""
    git = workspace / ".git"
    if os.path.islink(git) or not os.path.isdir(git):
        return []
    try:
        lines = (git / "objects" / "info" / "alternates").read_text().split()
    except (FileNotFoundError, NotADirectoryError):
        return []
    found: list[Path] = []
    for line in lines:
        path = Path(os.path.realpath(line))
        if os.path.isabs(line) and path.name == "objects" and path.is_dir() \
                and path not in found:
            found.append(path)
    return found


def bwrap_workspace_args(workspace: Path) -> list[str]:
    """The workspace read-write, its ``.git`` (a real directory or gitfile) read-only, and the
    object directories its clone borrows from a mirror read-only.

    A ``.git`` that is a symlink is not bound: binding would follow it to wherever it points;
    left alone, it is a link to a place that does not exist inside the sandbox (or, pointing into
    the workspace, to a place that was writable anyway).
    """
    ws = str(workspace)
    args = ["--bind", ws, ws]
    git = workspace / ".git"
    if os.path.lexists(git) and not os.path.islink(git):
        args += ["--ro-bind", str(git), str(git)]
    for objects in borrowed_object_dirs(workspace):
        args += ["--ro-bind", str(objects), str(objects)]
    return args
