"""The dependency caches' bounds (age, total size, one cache alone past the size), with caches
in use, hostile contents (a symlink out, a planted ``lock``) and the earlier layout; and the
operator's settings for the bounds, with hostile values."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from services.repos.dependency_caches import (
    CacheScope,
    DependencyCaches,
    dependency_caches,
    tree_bytes,
)
from tests.support.settings import studio_settings

MIB = 1024 * 1024


def _scope(name: str) -> CacheScope:
    return CacheScope("digest", name, "repository")


def _fill(data: Path, size: int) -> None:
    (data / "blob").write_bytes(os.urandom(size))


def _age(caches: DependencyCaches, scope: CacheScope, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(caches.root / scope.key / "lock", (then, then))


def test_the_age_bound_removes_idle_caches_only(tmp_path: Path) -> None:
    caches = DependencyCaches(tmp_path / "caches", max_bytes=100 * MIB, max_age_s=3600)
    old, busy, fresh = _scope("old"), _scope("busy"), _scope("fresh")
    for scope in (old, busy, fresh):
        with caches.use(scope) as data:
            _fill(data, 1024)
    _age(caches, old, 7200)
    with caches.use(busy):  # each use evicts first
        assert not (caches.root / old.key).exists()
        _age(caches, busy, 7200)  # unused for long by its record, but in use now: kept
        assert caches.evict() == []
    assert sorted(p.name for p in caches.root.iterdir()) == sorted([busy.key, fresh.key])


def test_the_size_bound_removes_the_least_recently_used_first(tmp_path: Path) -> None:
    caches = DependencyCaches(tmp_path / "caches", max_bytes=3 * MIB, max_age_s=86_400)
    scopes = [_scope(f"b{i}") for i in range(3)]
    for age, scope in zip((300, 200, 100), scopes, strict=True):
        with caches.use(scope) as data:
            _fill(data, MIB + 1)
        _age(caches, scope, age)
    # a fourth brings the total past 3 MiB: the oldest goes when it is acquired
    with caches.use(_scope("new")) as data:
        assert not (caches.root / scopes[0].key).exists()
        assert (caches.root / scopes[1].key).exists()
        _fill(data, 10)
    # one cache alone past the bound is removed when its user is done
    with caches.use(_scope("huge")) as data:
        _fill(data, 3 * MIB + 1)
    assert not (caches.root / _scope("huge").key).exists()


def test_a_symlink_in_a_cache_is_neither_followed_nor_counted(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_bytes(os.urandom(2 * MIB))
    caches = DependencyCaches(tmp_path / "caches", max_bytes=MIB, max_age_s=86_400)
    with caches.use(_scope("links")) as data:
        (data / "out").symlink_to(outside)
        (data / "lock").write_text("planted")  # the real lock is outside data/
    assert tree_bytes(outside) >= 2 * MIB
    entry = caches.root / _scope("links").key
    assert int((entry / "size").read_text()) < MIB  # the link's target was not counted
    _age(caches, _scope("links"), 10**9)
    assert caches.evict() == [entry]
    assert (outside / "keep.txt").stat().st_size == 2 * MIB and not entry.exists()


def test_the_earlier_layout_is_removed(tmp_path: Path) -> None:
    settings = studio_settings(tmp_path)
    legacy = tmp_path / "dependency-caches" / ("a" * 32)
    legacy.mkdir(parents=True)
    (legacy / "planted-by-agent").write_text("x")
    with dependency_caches(settings).use(_scope("main")) as data:
        assert list(data.iterdir()) == []
    assert not legacy.parent.exists()


@pytest.mark.parametrize(("name", "value"), [
    ("dependency_cache_max_mb", 0), ("dependency_cache_max_mb", -5),
    ("dependency_cache_max_mb", "lots"), ("dependency_cache_max_mb", 10**12),
    ("dependency_cache_max_age_days", 0), ("dependency_cache_max_age_days", "1; rm -rf /"),
    ("dependency_cache_max_age_days", 10**6),
])
def test_the_bounds_are_validated(tmp_path: Path, name: str, value: object) -> None:
    with pytest.raises(ValidationError, match=name):
        studio_settings(tmp_path, **{name: value})


def test_the_bounds_default_and_come_from_the_environment(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    caches = dependency_caches(studio_settings(tmp_path))
    assert caches.max_bytes == 10 * 1024 * MIB and caches.max_age_s == 14 * 86_400
    monkeypatch.setenv("STUDIO_DEPENDENCY_CACHE_MAX_MB", "512")
    monkeypatch.setenv("STUDIO_DEPENDENCY_CACHE_MAX_AGE_DAYS", "3")
    caches = dependency_caches(studio_settings(tmp_path))
    assert caches.max_bytes == 512 * MIB and caches.max_age_s == 3 * 86_400


@pytest.mark.parametrize("branch", ["../../etc", "main\0evil", "/abs", "a" * 5000, "..", ""])
def test_a_hostile_branch_name_stays_a_key_inside_the_root(tmp_path: Path, branch: str) -> None:
    caches = DependencyCaches(tmp_path / "caches", max_bytes=MIB, max_age_s=60)
    scope = _scope(branch)
    assert len(scope.key) == 64 and set(scope.key) <= set("0123456789abcdef")
    assert scope.key != _scope("main").key
    with caches.use(scope) as data:
        assert data == caches.root / scope.key / "data"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["caches"]


def test_a_symlink_in_place_of_the_data_directory_is_never_followed(tmp_path: Path) -> None:
    caches = DependencyCaches(tmp_path / "caches", max_bytes=MIB, max_age_s=60)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "keep").write_text("x")
    entry = caches.root / _scope("main").key
    entry.mkdir(parents=True)
    (entry / "data").symlink_to(tmp_path / "outside")
    with caches.use(_scope("main")) as data:  # no lock, no use: evicted, then made afresh
        assert not data.is_symlink() and list(data.iterdir()) == []
    assert (tmp_path / "outside" / "keep").read_text() == "x"
