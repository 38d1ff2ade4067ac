"""Property-based fuzzing of :func:`confinement.resolve_path` over a fixed symlink layout.

Paths are built from an alphabet of components that matter: ``..``, ``.``, ordinary names, links
leading outside, inside, nowhere, in chains and in loops, ``/proc/self/root``, ``.git`` in
several cases, NUL, a lone surrogate, and absolute prefixes. Whatever the path, either it is
refused with a :class:`ConfinementViolation`, or what comes back is inside the real root, not
under ``.git``, and the OS agrees (``os.path.realpath`` lands inside too). A second property
writes through the dispatcher and checks that nothing outside the workspace or in ``.git`` moved.
Derandomized and database-free, so every run tries the same examples.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.execution.confinement import Access, resolve_path
from services.execution.errors import ConfinementViolation, ErrorCode
from tests.unit.execution.confinement_layouts import (
    Dir,
    Entry,
    Fifo,
    File,
    Harness,
    Layout,
    Link,
    build_layout,
    leaked,
)

LINKS: dict[str, Entry] = {
    "out_file": Link("../outside/secret.txt"),
    "out_dir": Link("../outside"),
    "in_file": Link("README.md"),
    "in_dir": Link("src"),
    "dangling_in": Link("missing/file"),
    "dangling_out": Link("../outside/missing"),
    "chain": Link("chain2"),
    "chain2": Link("sub/chain3"),
    "sub/chain3": Link("../out_dir"),
    "chain_in": Link("chain_in2"),
    "chain_in2": Link("sub"),
    "proc": Link("/proc/self/root"),
    "proc_cwd": Link("/proc/self/cwd"),
    "abs_in": Link("{root}/src"),
    "abs_out": Link("{outside}"),
    "abs_root_dotdot": Link("{root}/../outside"),
    "loop1": Link("loop2"),
    "loop2": Link("loop1"),
    "up": Link("sub/../.."),
    "self": Link("."),
    "gitlink": Link(".git"),
    "hooks": Link(".git/hooks"),
    "devnull": Link("/dev/null"),
    "pipe": Fifo(),
    "sub/deep/leaf.txt": File("leaf\n"),
    "sub/empty": Dir(),
}
NAMES = ["README.md", "src", "sub", "deep", "leaf.txt", "new", "a b", "ünï", "config"]
SPECIAL = ["..", ".", "", ".git", ".GIT", ".Git", "hooks", "\x00", "x\x00y", "\ud800"]
COMPONENTS = NAMES + SPECIAL + list({k.split("/")[-1] for k in LINKS})
PREFIXES = ["", "", "", "/", "/proc/self/root", "/proc/self/cwd", "/etc", "{root}",
            "{root}/..", "{outside}", "/dev"]
REFUSAL_CODES = {ErrorCode.PATH_OUTSIDE_WORKSPACE, ErrorCode.PROTECTED_PATH,
                 ErrorCode.INVALID_ARGUMENTS, ErrorCode.UNSUPPORTED_FILE_TYPE}

paths = st.builds(
    lambda prefix, parts: prefix + ("/" if prefix and parts else "") + "/".join(parts),
    st.sampled_from(PREFIXES),
    st.lists(st.sampled_from(COMPONENTS), min_size=0, max_size=8),
)


@pytest.fixture(scope="module")
def read_layout(tmp_path_factory: pytest.TempPathFactory) -> Layout:
    return build_layout(tmp_path_factory.mktemp("prop-read"), LINKS)


@pytest.fixture(scope="module")
def write_layout(tmp_path_factory: pytest.TempPathFactory) -> Layout:
    return build_layout(tmp_path_factory.mktemp("prop-write"), LINKS)


def _inside(path: Path | str, root: Path) -> bool:
    path = Path(path)
    return path == root or root in path.parents


def _under_git(path: Path, root: Path) -> bool:
    return any(p.casefold() == ".git" for p in path.relative_to(root).parts)


def check_resolution(layout: Layout, raw: str, access: Access, follow_final: bool) -> None:
    root = Path(os.path.realpath(layout.root))
    try:
        resolved = resolve_path(layout.root, raw, access=access, follow_final=follow_final)
    except ConfinementViolation as refused:
        assert refused.code in REFUSAL_CODES
        return
    assert resolved.root == root
    assert _inside(resolved.absolute, root), raw
    assert not _under_git(resolved.absolute, root), raw
    # the link itself (follow_final=False) may lead anywhere: its parent is what was resolved
    kept_link = not follow_final and resolved.absolute != root
    real = os.path.realpath(resolved.absolute.parent if kept_link else resolved.absolute)
    assert _inside(real, root), (raw, real)
    assert not _under_git(Path(real), root), (raw, real)
    if access is Access.WRITE:
        assert resolved.relative.parts[:2] != (".github", "workflows")


@settings(max_examples=2000, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=paths, access=st.sampled_from(list(Access)), follow_final=st.booleans())
def test_resolve_path_stays_inside(read_layout: Layout, raw: str, access: Access,
                                   follow_final: bool) -> None:
    check_resolution(read_layout, read_layout.expand(raw), access, follow_final)


@settings(max_examples=300, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=paths)
def test_write_file_never_escapes(write_layout: Layout, raw: str) -> None:
    before = write_layout.guarded()
    harness = Harness(write_layout)
    envelope: dict[str, Any] = harness.call("workspace.write_file",
                                            {"path": write_layout.expand(raw), "content": "PWN"})
    assert write_layout.guarded() == before, raw
    assert leaked(envelope) == []
    if envelope["ok"]:
        written = write_layout.root / envelope["result"]["path"]
        assert _inside(os.path.realpath(written), Path(os.path.realpath(write_layout.root)))
    else:
        assert envelope["error"]["code"] != "internal_error", envelope
